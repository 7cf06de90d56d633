--[[ include.lua: pull code excerpts from the real files at site build time.

A fenced code block with an `include` attribute gets its text from a file
(path from the repository root), or from one marked region of it:

    ```{.cuda include="solutions/03-shared-memory-tiling/tiled.cu" region="online-update"}
    ```

In the source the region is delimited by two marker lines (dropped from the
excerpt, as are the markers of any region nested inside it):

    // [region online-update]
    ...
    // [end online-update]

`#` works instead of `//` for shell scripts and makefiles. The excerpt is
dedented. A missing file, a missing region, a region without its end marker or
a region marked twice stops the build with a message naming the page and the
path. Without a class, the language comes from the file extension.

Environment: DOCS_ROOT (repository root, default "."), DOCS_SRC (the page's
source path, for messages).
]]

local ROOT = os.getenv('DOCS_ROOT') or '.'
local PAGE = os.getenv('DOCS_SRC') or (PANDOC_STATE.input_files[1] or 'stdin')

local function fail(msg)
  error('\n' .. PAGE .. ': ' .. msg .. '\n', 0)
end

local function marker(line)
  -- returns kind ("region"/"end"), name; or nil for an ordinary line
  local kind, name = line:match('^%s*//%s*%[(%a+)%s+([%w_.%-]+)%]%s*$')
  if not kind then
    kind, name = line:match('^%s*#%s*%[(%a+)%s+([%w_.%-]+)%]%s*$')
  end
  if kind == 'region' or kind == 'end' then return kind, name end
  return nil
end

local function split_lines(text)
  local lines = {}
  text = text:gsub('\r\n', '\n')
  for line in (text .. '\n'):gmatch('([^\n]*)\n') do lines[#lines + 1] = line end
  if lines[#lines] == '' then lines[#lines] = nil end
  return lines
end

local function extract(lines, path, region)
  local first, last
  for i, line in ipairs(lines) do
    local kind, name = marker(line)
    if kind == 'region' and name == region then
      if first then fail(('include: region "%s" is marked twice in %s (lines %d and %d)')
                         :format(region, path, first - 1, i)) end
      first = i + 1
    elseif kind == 'end' and name == region and first and not last then
      last = i - 1
    end
  end
  if not first then fail(('include: no region "%s" in %s (expected a line "// [region %s]")')
                         :format(region, path, region)) end
  if not last then fail(('include: region "%s" in %s has no end marker "// [end %s]"')
                        :format(region, path, region)) end
  local out = {}
  for i = first, last do out[#out + 1] = lines[i] end
  return out
end

local function tidy(lines)
  local out = {}
  for _, line in ipairs(lines) do
    if not marker(line) then out[#out + 1] = (line:gsub('%s+$', '')) end
  end
  while #out > 0 and out[1] == '' do table.remove(out, 1) end
  while #out > 0 and out[#out] == '' do table.remove(out) end
  -- Dedent by the smallest indentation, ignoring preprocessor lines (#pragma at
  -- column 0 inside a loop), which stay where they are.
  local indent
  for _, line in ipairs(out) do
    if line ~= '' and not line:match('^#') then
      local lead = line:match('^[ \t]*')
      if not indent or #lead < #indent then indent = lead end
    end
  end
  if indent and #indent > 0 then
    for i, line in ipairs(out) do
      if line:sub(1, #indent) == indent then out[i] = line:sub(#indent + 1) end
    end
  end
  return table.concat(out, '\n')
end

local lang_of_ext = {
  cu = 'cuda', cuh = 'cuda', c = 'c', h = 'c', cpp = 'cpp', hpp = 'cpp',
  py = 'python', sh = 'bash', mk = 'makefile', lua = 'lua', csv = 'csv',
}

function CodeBlock(cb)
  local path = cb.attributes['include']
  if not path then return nil end
  local region = cb.attributes['region']
  if path == '' then fail('include: empty include="" attribute') end
  if path:match('^/') or path:match('%.%.') then
    fail(('include: "%s" must be a path from the repository root, without ".."'):format(path))
  end
  local f = io.open(ROOT .. '/' .. path, 'rb')
  if not f then fail(('include: cannot read "%s" (path from the repository root)'):format(path)) end
  local text = f:read('a')
  f:close()
  local lines = split_lines(text)
  if region and region ~= '' then lines = extract(lines, path, region) end
  if cb.text:match('%S') then
    io.stderr:write(('[WARNING] %s: include block for %s has text of its own; it is replaced by the file\'s\n')
                    :format(PAGE, path))
  end
  cb.text = tidy(lines)
  if cb.text == '' then fail(('include: region "%s" in %s is empty'):format(region or '', path)) end
  cb.attributes['include'] = nil
  cb.attributes['region'] = nil
  if #cb.classes == 0 then
    local ext = path:match('%.([%w]+)$')
    local base = path:match('([^/]+)$')
    local lang = (ext and lang_of_ext[ext]) or (base == 'Makefile' and 'makefile') or nil
    if lang then cb.classes:insert(lang) end
  end
  local label = path .. ((region and region ~= '') and (' · ' .. region) or '')
  return pandoc.Div({
    pandoc.Para({ pandoc.Code(label) }),
    cb,
  }, pandoc.Attr('', { 'listing' }))
end

--[[ include.lua: pull code excerpts from the real files at site build time.

A fenced code block with an `include` attribute gets its text from a file
(path from the repository root), or from one marked region of it:

    ```{.cuda include="solutions/03-shared-memory-tiling/tiled.cu" region="online-update"}
    // solutions/03-shared-memory-tiling/tiled.cu, region "online-update" (shown on the course site)
    ```

The fence's own body is for GitHub, which shows it instead of the excerpt: exactly
one line naming the file and the region (`region "NAME"`; no region for a whole
file). The build ignores that line but checks it, and stops with the page, the
line and the fix (tests/docs/fence_bodies.py --fix PAGE writes every such line)
when it is empty, longer, or names another file or region.

An excerpt from solutions/ is the answer to a TODO: it goes into a collapsed
<details class="solution"> block whose summary reads "Show the solution's code"
and names the file and region. Any other excerpt (the starter in lessons/, the
harness in reference/: code the student reads but does not write) stays visible.
Either way the listing is a div.listing with data-file="PATH" (and data-region=
"NAME"), which tests/docs/check_site.py counts against the page's fences.

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
source path from the repository root, for messages and fence line numbers).
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

-- The starter generator's markup in a solution (reference/tools/starters.py): "// TODO(k) begin",
-- "// solution end", and the starter's own lines, "//| ...". The site shows the solution's code.
local function starter_markup(line)
  return line:match('^%s*//|') or line:match('^%s*//%s*TODO%(%w+%) begin') or line:match('^%s*//%s*TODO%(%w+%) end')
    or line:match('^%s*//%s*solution begin') or line:match('^%s*//%s*solution end')
end

local function tidy(lines)
  local out = {}
  for _, line in ipairs(lines) do
    if not marker(line) and not starter_markup(line) then out[#out + 1] = (line:gsub('%s+$', '')) end
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

-- Line of the n-th include fence for (path, region) in the page's source, for messages
-- (pandoc gives blocks no source positions). CodeBlock counts the fences in `seen`.
local seen = {}
local function fence_key(path, region) return path .. '\0' .. (region or '') end
local function fence_line(path, region)
  local key = fence_key(path, region)
  local f = io.open(ROOT .. '/' .. PAGE, 'rb')
  if not f then return '?' end
  local n, lineno = 0, 0
  for line in f:lines() do
    lineno = lineno + 1
    local info = line:match('^%s*```+(.*)$') or line:match('^%s*~~~+(.*)$')
    if info then
      local p = info:match('include="([^"]*)"') or info:match("include='([^']*)'")
      local r = info:match('region="([^"]*)"') or info:match("region='([^']*)'")
      if p == path and (r or '') == (region or '') then
        n = n + 1
        if n == seen[key] then f:close() return tostring(lineno) end
      end
    end
  end
  f:close()
  return '?'
end

-- The rule of tests/docs/fence_bodies.py: one non-blank line that names the file and region.
local function body_problem(text, path, region)
  local lines = {}
  for line in (text .. '\n'):gmatch('([^\n]*)\n') do
    if line:match('%S') then lines[#lines + 1] = line end
  end
  if #lines == 0 then return 'its body is empty' end
  if #lines > 1 then return ('its body has %d lines'):format(#lines) end
  local line = lines[1]
  if not line:find(path, 1, true) then
    return ('its body does not name the file: "%s"'):format(line)
  end
  if region and not line:find('region "' .. region .. '"', 1, true) then
    return ('its body does not name the region: "%s"'):format(line)
  end
  if not region and line:find('region "', 1, true) then
    return ('its body names a region, but the fence includes the whole file: "%s"'):format(line)
  end
  return nil
end

local function html_escape(s)
  return (s:gsub('&', '&amp;'):gsub('<', '&lt;'):gsub('>', '&gt;'):gsub('"', '&quot;'))
end

function CodeBlock(cb)
  local path = cb.attributes['include']
  if not path then return nil end
  local region = cb.attributes['region']
  if region == '' then region = nil end
  if path == '' then fail('include: empty include="" attribute') end
  if path:match('^/') or path:match('%.%.') then
    fail(('include: "%s" must be a path from the repository root, without ".."'):format(path))
  end
  seen[fence_key(path, region)] = (seen[fence_key(path, region)] or 0) + 1
  local problem = body_problem(cb.text, path, region)
  if problem then
    local where = path .. (region and (' region "' .. region .. '"') or '')
    error(('\n%s:%s: include fence for %s: %s. Its body must be the one line GitHub readers see '
           .. 'instead of the code, naming the file and region; write it with: '
           .. 'python3 tests/docs/fence_bodies.py --fix %s\n')
          :format(PAGE, fence_line(path, region), where, problem, PAGE), 0)
  end
  local f = io.open(ROOT .. '/' .. path, 'rb')
  if not f then fail(('include: cannot read "%s" (path from the repository root)'):format(path)) end
  local text = f:read('a')
  f:close()
  local lines = split_lines(text)
  if region then lines = extract(lines, path, region) end
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
  local attrs = { { 'file', path } }   -- a list of pairs: the order stays the same build to build
  if region then attrs[2] = { 'region', region } end
  if not path:match('^solutions/') then
    -- Given code (the starter, the harness): visible, under its file and region.
    local label = path .. (region and (' · ' .. region) or '')
    return pandoc.Div({ pandoc.Para({ pandoc.Code(label) }), cb },
                      pandoc.Attr('', { 'listing' }, attrs))
  end
  -- The solution's code: one click away, never in view by default.
  local label = '<code>' .. html_escape(path) .. '</code>'
                .. (region and (' · ' .. html_escape(region)) or '')
  return {
    pandoc.RawBlock('html', '<details class="solution">\n<summary>Show the solution\'s code '
                    .. '<span class="excerpt-source">' .. label .. '</span></summary>'),
    pandoc.Div({ cb }, pandoc.Attr('', { 'listing', 'solution-code' }, attrs)),
    pandoc.RawBlock('html', '</details>'),
  }
end

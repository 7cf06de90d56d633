--[[ results.lua: fill the results page from docs/results/ at build time.

A div with id "results" is replaced by one section per docs/results/*.csv (those
of `make results` first, then `make bench`'s bench-*.csv), each with
  - the "# key: value" lines at the top of the file (GPU, date, commit...),
  - its charts: the committed docs/results/<csv name>-*.svg, or else the TFLOP/s
    chart docs/build.sh drew with gnuplot (<site>/assets/results/<name>-tflops.svg),
  - the rows as a table; columns with the same value on every row are listed once
    above it, and a long table is folded (<details>, no script needed).
Committed charts that belong to no CSV follow under "Other charts". With no CSV
and no chart the page says that there are no results yet.

Environment (set by docs/build.sh): DOCS_ROOT, DOCS_OUT, DOCS_RESULTS_CSV and
DOCS_RESULTS_SVG (newline-separated paths from the repository root).
]]

local ROOT = os.getenv('DOCS_ROOT') or '.'
local OUT = os.getenv('DOCS_OUT') or 'docs/site'
local FOLD_ROWS = 30

local function list(var)
  local out = {}
  for p in (os.getenv(var) or ''):gmatch('[^\n]+') do out[#out + 1] = p end
  return out
end

local function read(path)
  local f = io.open(path, 'rb')
  if not f then return nil end
  local t = f:read('a')
  f:close()
  return t
end

local function base(path) return path:match('([^/]+)%.%w+$') end

local function figure(src, caption)
  -- an image alone in a paragraph with a "fig:" title: pandoc writes a <figure>
  return pandoc.Para({ pandoc.Image({ pandoc.Str(caption) }, src, 'fig:') })
end

local function split_csv(line)
  local fields, pos = {}, 1
  while pos <= #line + 1 do
    local c = line:sub(pos, pos)
    if c == '"' then
      local val, i = '', pos + 1
      while i <= #line do
        local ch = line:sub(i, i)
        if ch == '"' and line:sub(i + 1, i + 1) == '"' then val = val .. '"'; i = i + 2
        elseif ch == '"' then i = i + 1; break
        else val = val .. ch; i = i + 1 end
      end
      fields[#fields + 1] = val
      pos = (line:find(',', i, true) or #line + 1) + 1
    else
      local stop = line:find(',', pos, true) or (#line + 1)
      fields[#fields + 1] = line:sub(pos, stop - 1)
      pos = stop + 1
    end
  end
  return fields
end

local function quote(v)
  if v:find('[,"]') then return '"' .. v:gsub('"', '""') .. '"' end
  return v
end

-- Parse: "# key: value" comments, one header line (repeats dropped), rows.
local function parse(text)
  local notes, header, rows = {}, nil, {}
  for line in text:gsub('\r', ''):gmatch('[^\n]+') do
    if line:match('^#') then
      notes[#notes + 1] = line:gsub('^#%s*', '')
    elseif not header then
      header = line
    elseif line ~= header then
      rows[#rows + 1] = split_csv(line)
    end
  end
  return notes, header and split_csv(header) or nil, rows
end

local function csv_section(csv, svgs, used)
  local blocks = pandoc.List()
  local name = base(csv)
  blocks:insert(pandoc.Header(2, { pandoc.Str(name) }, pandoc.Attr(name)))
  local notes, header, rows = parse(read(ROOT .. '/' .. csv) or '')
  local about = { pandoc.Str('From'), pandoc.Space(), pandoc.Code(csv) }
  for _, n in ipairs(notes) do
    about[#about + 1] = pandoc.Str(';')
    about[#about + 1] = pandoc.Space()
    about[#about + 1] = pandoc.Str(n)
  end
  about[#about + 1] = pandoc.Str('.')
  blocks:insert(pandoc.Para(about))

  local charts = 0
  for _, svg in ipairs(svgs) do
    local b = base(svg)
    if b:sub(1, #name + 1) == name .. '-' then
      blocks:insert(figure('assets/' .. svg, (b:sub(#name + 2):gsub('[_-]', ' '))))
      used[svg] = true
      charts = charts + 1
    end
  end
  local drawn = 'assets/results/' .. name .. '-tflops.svg'
  if charts == 0 and read(OUT .. '/' .. drawn) then
    blocks:insert(figure(drawn, 'TFLOP/s of every passing row'))
  end

  if not header or #rows == 0 then
    blocks:insert(pandoc.Para({ pandoc.Emph({ pandoc.Str('No rows.') }) }))
    return blocks
  end
  -- Columns with one value on every row are said once, above the table.
  local keep, same = {}, {}
  for c, h in ipairs(header) do
    local v, const = rows[1][c] or '', true
    for _, r in ipairs(rows) do if (r[c] or '') ~= v then const = false break end end
    local key = c == 1 or h == 'status'
    if const and #rows > 1 and not key then
      same[#same + 1] = h .. ' = ' .. (v ~= '' and v or '(empty)')
    else
      keep[#keep + 1] = c
    end
  end
  if #same > 0 then
    blocks:insert(pandoc.Para({ pandoc.Str('Every row: ' .. table.concat(same, ', ') .. '.') }))
  end
  local lines = {}
  local hdr = {}
  for _, c in ipairs(keep) do hdr[#hdr + 1] = quote(header[c]) end
  lines[1] = table.concat(hdr, ',')
  for _, r in ipairs(rows) do
    local cells = {}
    for _, c in ipairs(keep) do cells[#cells + 1] = quote(r[c] or '') end
    lines[#lines + 1] = table.concat(cells, ',')
  end
  local tbl = pandoc.read(table.concat(lines, '\n') .. '\n', 'csv').blocks[1]
  local wide = pandoc.Div({ tbl }, pandoc.Attr('', { 'wide' }))
  if #rows > FOLD_ROWS then
    blocks:insert(pandoc.RawBlock('html', ('<details><summary>All %d rows</summary>'):format(#rows)))
    blocks:insert(wide)
    blocks:insert(pandoc.RawBlock('html', '</details>'))
  else
    blocks:insert(wide)
  end
  return blocks
end

function Div(div)
  if div.identifier ~= 'results' then return nil end
  local csvs, svgs = list('DOCS_RESULTS_CSV'), list('DOCS_RESULTS_SVG')
  -- `make results` files first, then the benchmark grids.
  table.sort(csvs, function(a, b)
    local ba, bb = base(a):match('^bench%-') ~= nil, base(b):match('^bench%-') ~= nil
    if ba ~= bb then return bb end
    return a < b
  end)
  local blocks, used = pandoc.List(), {}
  for _, csv in ipairs(csvs) do blocks:extend(csv_section(csv, svgs, used)) end
  local others = pandoc.List()
  for _, svg in ipairs(svgs) do
    if not used[svg] then others:insert(figure('assets/' .. svg, (base(svg):gsub('[_-]', ' ')))) end
  end
  if #others > 0 then
    blocks:insert(pandoc.Header(2, { pandoc.Str('Other charts') }, pandoc.Attr('other-charts')))
    blocks:extend(others)
  end
  if #blocks == 0 then
    blocks:insert(pandoc.Para({ pandoc.Strong({ pandoc.Str('No results yet.') }), pandoc.Space(),
      pandoc.Str('They appear here once'), pandoc.Space(), pandoc.Code('make results'), pandoc.Space(),
      pandoc.Str('or'), pandoc.Space(), pandoc.Code('make bench'), pandoc.Space(),
      pandoc.Str('has run on a GPU and its files are committed to'), pandoc.Space(),
      pandoc.Code('docs/results/'), pandoc.Str('.') }))
  end
  return pandoc.Div(blocks, pandoc.Attr('results', {}))
end

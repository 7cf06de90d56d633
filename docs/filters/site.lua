--[[ site.lua: turn one markdown page of the repository into a page of the site.

- Title: the first level-1 heading becomes the page title (and leaves the body).
- Links between pages: a link to another page's source (a lesson's README.md,
  with or without a #fragment, or its folder; docs/index.md or the top
  README.md, without its fragment; docs/results.md) becomes a link to that
  page's .html.
- Links to other files of the repository (source files, headers...) become
  plain text marked with class "repo-path" (the path in the tooltip): the site
  is read offline and carries no copy of the sources. Links to files that do
  not exist are left alone, so the site check reports them as broken.
- Images in the repository are copied to <site>/assets/<path from repo root>;
  an image alone in a paragraph becomes a figure captioned by its alt text.
- Navigation: every page gets the list of the main pages (index, lessons,
  results), previous and next.
- A lesson's extra pages (another .md in its folder, and worklog/README.md) are not in
  that list: the lesson page ends with a "More in this lesson" section linking
  them, and an extra page starts with a line naming its lesson, has the lesson as
  previous page and the page after the lesson as next.
- A div with id "lesson-list" is replaced by the list of lessons.
- Code blocks: "sh"/"shell" are highlighted as "bash", and "text" is written as a
  plain <pre class="text">, without asking the highlighter. The highlighter knows
  neither name, and looking one up by file extension loads every syntax it has:
  about 0.5 s for each page that has such a block, the same HTML in the end.

Environment (set by docs/build.sh): DOCS_ROOT, DOCS_OUT, DOCS_SRC (this page's
source, from the repository root), DOCS_PAGES (tab-separated: id, source, title,
parent page id or empty).
]]

local ROOT = os.getenv('DOCS_ROOT') or '.'
local OUT = os.getenv('DOCS_OUT') or 'docs/site'
local SRC = os.getenv('DOCS_SRC') or ''
local PAGES_FILE = os.getenv('DOCS_PAGES')

local function warn(msg) io.stderr:write('[WARNING] ' .. msg .. '\n') end

-- The site's pages, in reading order, and what each one is made from.
local pages, page_of_path = {}, {}
if PAGES_FILE then
  for line in io.lines(PAGES_FILE) do
    local id, src, title, parent = line:match('^([^\t]+)\t([^\t]+)\t([^\t]*)\t?([^\t]*)$')
    if id then
      pages[#pages + 1] = { id = id, src = src, title = title, parent = parent ~= '' and parent or nil }
      page_of_path[src] = id
      local dir = src:match('^(lessons/[^/]+)/README%.md$') or src:match('^(lessons/[^/]+/worklog)/README%.md$')
      if dir then page_of_path[dir] = id end
    end
  end
end
if page_of_path['docs/index.md'] then page_of_path['README.md'] = page_of_path['docs/index.md'] end

local function normalize(path)
  local parts = {}
  for seg in path:gmatch('[^/]+') do
    if seg == '..' then
      if #parts == 0 then return nil end
      table.remove(parts)
    elseif seg ~= '.' then
      parts[#parts + 1] = seg
    end
  end
  return table.concat(parts, '/')
end

local SRC_DIR = SRC:match('^(.*)/[^/]*$') or ''

-- repository path of a relative link target, or nil for external/absolute/in-page ones
local function resolve(target)
  if target:match('^[%a][%w+.%-]*:') or target:match('^//') or target:match('^#')
     or target:match('^/') or target == '' then
    return nil
  end
  local path, frag = target:match('^([^#?]*)[^#]*(#?.*)$')
  path = path:gsub('%%20', ' ')
  local p = normalize((SRC_DIR ~= '' and (SRC_DIR .. '/') or '') .. path)
  return p, frag
end

local function exists(p)
  local f = io.open(ROOT .. '/' .. p, 'rb')
  if f then f:close() return true end
  return false
end

local function copy_asset(p)
  local src = io.open(ROOT .. '/' .. p, 'rb')
  if not src then return false end
  local data = src:read('a')
  src:close()
  local dest = OUT .. '/assets/' .. p
  os.execute("mkdir -p '" .. dest:match('^(.*)/[^/]*$'):gsub("'", "'\\''") .. "'")
  local out = assert(io.open(dest, 'wb'))
  out:write(data)
  out:close()
  return true
end

local function Link(link)
  local p, frag = resolve(link.target)
  if p == nil then return nil end
  local id = page_of_path[(p:gsub('/$', ''))]
  if id then
    -- The top README.md becomes the index page, whose headings differ: drop its #fragment.
    link.target = id .. '.html' .. ((p == 'README.md') and '' or frag)
    return link
  end
  if p ~= '' and exists(p) then
    return pandoc.Span(link.content, pandoc.Attr('', { 'repo-path' }, { title = p }))
  end
  warn('link to "' .. link.target .. '": no such page or file')
  return nil
end

local function Image(img)
  local p = resolve(img.src)
  if p == nil then return nil end
  if copy_asset(p) then
    img.src = 'assets/' .. p
  else
    warn('image "' .. img.src .. '": no such file')
  end
  return img
end

-- An image alone in a paragraph, with alt text, is a figure with that caption
-- (commonmark_x in pandoc 2.17 has no implicit_figures).
local function Para(para)
  if #para.content == 1 and para.content[1].t == 'Image' then
    local img = para.content[1]
    if #img.caption > 0 and not img.title:match('^fig:') then
      img.title = 'fig:' .. img.title
      return para
    end
  end
  return nil
end

-- texmath 0.12 (pandoc 2.17) writes \ell as an operator (<mo>), which browsers space
-- like a "+"; the Unicode letter becomes an identifier (<mi>) like any other variable.
local function Math(m)
  local text = m.text:gsub('\\ell%f[^%a]', 'ℓ')
  if text ~= m.text then
    m.text = text
    return m
  end
  return nil
end

local HIGHLIGHT_AS = { sh = 'bash', shell = 'bash' }
local function CodeBlock(cb)
  local lang = cb.classes[1]
  if HIGHLIGHT_AS[lang] then
    cb.classes[1] = HIGHLIGHT_AS[lang]
    return cb
  end
  if lang == 'text' and #cb.classes == 1 and cb.identifier == '' then
    local esc = cb.text:gsub('[&<>"\']', { ['&'] = '&amp;', ['<'] = '&lt;', ['>'] = '&gt;',
                                            ['"'] = '&quot;', ["'"] = '&#39;' })
    return pandoc.RawBlock('html', '<pre class="text"><code>' .. esc .. '</code></pre>')
  end
  return nil
end

local function inlines_of(text)
  local doc = pandoc.read(text, 'commonmark_x')
  if #doc.blocks > 0 and doc.blocks[1].content then return doc.blocks[1].content end
  return pandoc.List({ pandoc.Str(text) })
end

local function Pandoc(doc)
  local meta, blocks = doc.meta, doc.blocks
  -- Title from the first level-1 heading.
  if meta.title == nil then
    for i, b in ipairs(blocks) do
      if b.t == 'Header' and b.level == 1 then
        meta.title = pandoc.MetaInlines(b.content)
        table.remove(blocks, i)
        break
      end
    end
  end
  if meta.title == nil then meta.title = pandoc.MetaInlines({ pandoc.Str(SRC) }) end
  meta.pagetitle = pandoc.utils.stringify(meta.title)
  local site_title = meta['site-title'] and pandoc.utils.stringify(meta['site-title']) or ''
  if site_title ~= '' and site_title ~= meta.pagetitle then
    meta['title-suffix'] = pandoc.MetaString(site_title)
  end

  -- Navigation: the main pages in reading order; an extra page sits after its lesson.
  local nav, here, this, pos = {}, nil, nil, {}
  for _, pg in ipairs(pages) do
    if pg.src == SRC then this = pg end
    if not pg.parent then
      nav[#nav + 1] = pandoc.MetaMap({
        href = pandoc.MetaString(pg.id .. '.html'),
        title = pandoc.MetaInlines(inlines_of(pg.title)),
        current = pandoc.MetaBool(pg.src == SRC),
      })
      pos[pg.id] = #nav
      if pg.src == SRC then here = #nav end
    end
  end
  meta.pages = pandoc.MetaList(nav)
  if this and this.parent and pos[this.parent] then
    local p = pos[this.parent]
    meta.prev = nav[p]
    if p < #nav then meta.next = nav[p + 1] end
  elseif here then
    if here > 1 then meta.prev = nav[here - 1] end
    if here < #nav then meta.next = nav[here + 1] end
  end
  if this then meta['page-id'] = pandoc.MetaString(this.id) end
  if SRC:match('^lessons/') then meta['is-lesson'] = pandoc.MetaBool(true) end
  meta['source-path'] = pandoc.MetaString(SRC)

  -- The list of lessons, where the page asks for it.
  local out = pandoc.List()
  if this and this.parent then
    for _, pg in ipairs(pages) do
      if pg.id == this.parent then
        out:insert(pandoc.Div({ pandoc.Para({ pandoc.Str('Part of'), pandoc.Space(),
          pandoc.Link(inlines_of(pg.title), pg.id .. '.html'), pandoc.Str('.') }) },
          pandoc.Attr('', { 'parent-lesson' })))
      end
    end
  end
  for _, b in ipairs(blocks) do
    if b.t == 'Div' and b.identifier == 'lesson-list' then
      local items = pandoc.List()
      for _, pg in ipairs(pages) do
        if pg.src:match('^lessons/') and not pg.parent then
          items:insert({ pandoc.Plain({ pandoc.Link(inlines_of(pg.title), pg.id .. '.html') }) })
        end
      end
      if #items == 0 then
        out:insert(pandoc.Para({ pandoc.Emph({ pandoc.Str('No lessons yet.') }) }))
      else
        out:insert(pandoc.Div({ pandoc.BulletList(items) }, pandoc.Attr('lesson-list', { 'lesson-list' })))
      end
    else
      out:insert(b)
    end
  end
  -- A lesson page links its extra pages at the end.
  if this and not this.parent then
    local items = pandoc.List()
    for _, pg in ipairs(pages) do
      if pg.parent == this.id then
        items:insert({ pandoc.Plain({ pandoc.Link(inlines_of(pg.title), pg.id .. '.html') }) })
      end
    end
    if #items > 0 then
      out:insert(pandoc.Header(2, { pandoc.Str('More'), pandoc.Space(), pandoc.Str('in'), pandoc.Space(),
        pandoc.Str('this'), pandoc.Space(), pandoc.Str('lesson') }, pandoc.Attr('more-in-this-lesson')))
      out:insert(pandoc.Div({ pandoc.BulletList(items) }, pandoc.Attr('', { 'lesson-extras' })))
    end
  end
  return pandoc.Pandoc(out, meta)
end

return {
  { Link = Link, Image = Image, Para = Para, Math = Math, CodeBlock = CodeBlock },
  { Pandoc = Pandoc },
}

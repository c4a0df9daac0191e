-- The examples of docs/lua.md stand alone and print what the page shows: each
-- ```lua block runs, as it is, in a fresh lua5.4 (only the module paths of this
-- run are given to it), exits 0 with nothing on stderr, and prints exactly the
-- ```text block that follows it -- the same lines in the same order, every run
-- (tests/python/test_docs.py does the same for docs/python.md).  The luv
-- example runs where luv is installed.
local function doc_path()
  local here = debug.getinfo(1, "S").source:match("^@(.*)/tests/lua/") or "."
  return here .. "/docs/lua.md"
end

-- Every fenced block of `text` in order: { lang = ..., body = ... }.
local function fences(text)
  local out = {}
  for lang, body in text:gmatch("```(%w*)\n(.-)```") do
    out[#out + 1] = { lang = lang, body = body }
  end
  return out
end

local function slurp(path)
  local f = assert(io.open(path))
  local s = f:read("a")
  f:close()
  return s
end

-- Runs `code` in a child lua5.4 with this run's module paths; its stdout,
-- stderr and exit status.  `timeout` kills a child that hangs.
local function run_child(code)
  local src, err = os.tmpname(), os.tmpname()
  local f = assert(io.open(src, "w"))
  f:write(code)
  f:close()
  local paths = string.format("package.path = %q package.cpath = %q", package.path, package.cpath)
  local p = assert(io.popen(string.format("timeout 60 lua5.4 -e %q %q 2>%q", paths, src, err)))
  local out = p:read("a")
  local _, _, status = p:close()
  local stderr = slurp(err)
  os.remove(src)
  os.remove(err)
  return out, stderr, status
end

describe("docs", function()
  local blocks = fences(slurp(doc_path()))
  local has_luv = pcall(require, "luv")
  local n, luv_blocks = 0, 0
  for i, block in ipairs(blocks) do
    if block.lang == "lua" then
      n = n + 1
      local output = blocks[i + 1] and blocks[i + 1].lang == "text" and blocks[i + 1].body
      local name = "lua_md_example_" .. n .. "_prints_what_the_page_shows"
      local needs_luv = block.body:find('require "luv"', 1, true) ~= nil
      if needs_luv then luv_blocks = luv_blocks + 1 end
      if needs_luv and not has_luv then
        pending(name .. " (luv is not installed: apt-get install lua-luv)")
      else
        it(name, function()
          for _ = 1, 2 do                       -- the same every run
            local out, stderr, status = run_child(block.body)
            assert.equal(0, status, stderr)
            assert.equal("", stderr)
            assert.is_truthy(output, "the example is not followed by its output (a ```text block)")
            assert.equal(output, out)
          end
        end)
      end
    end
  end
  it("lua_md_has_examples", function() assert.is_true(n >= 8) end)
  it("lua_md_has_a_luv_example", function() assert.equal(1, luv_blocks) end)

  it("lua_md_the_fiber_demo_runs_and_reports_its_deadlock", function()
    -- docs/examples/fiber_demo.lua, as make demo runs it, with this module
    local out, stderr, status = run_child(slurp(doc_path():gsub("lua%.md$", "examples/fiber_demo.lua")))
    out = out .. stderr
    assert.equal(0, status, out)
    assert.truthy(out:find("pipeline total = 10", 1, true), out)
    assert.truthy(out:find("timer handler fired in a fiber", 1, true), out)
    assert.truthy(out:find("wait-for cycle", 1, true), out)
  end)
end)

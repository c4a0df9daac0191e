-- The fiber examples of docs/lua.md run as they stand.
local function doc_path()
  local here = debug.getinfo(1, "S").source:match("^@(.*)/tests/lua/") or "."
  return here .. "/docs/lua.md"
end

describe("docs/lua.md", function()
  local f = assert(io.open(doc_path()))
  local text = f:read("a")
  f:close()
  local n = 0
  for block in text:gmatch("```lua\n(.-)```") do
    if block:find("px%.run") then
      n = n + 1
      it("the_documented_example_runs #" .. n, function()
        local chunk = assert(load('local px = require "parataxis"\n' ..
          block:gsub('^local px = require "parataxis"\n', ''), "=docs/lua.md"))
        chunk()
      end)
    end
  end
  it("has_fiber_examples", function() assert.is_true(n >= 4) end)

  it("the_fiber_demo_runs_and_reports_its_deadlock", function()
    -- docs/examples/fiber_demo.lua, as make demo runs it, with this module
    local demo = doc_path():gsub("lua%.md$", "examples/fiber_demo.lua")
    local code = string.format("package.cpath = %q package.path = %q dofile(%q)",
                               package.cpath, package.path, demo)
    local p = io.popen(string.format("lua5.4 -e %q 2>&1; echo \"status=$?\"", code))
    local out = p:read("a")
    p:close()
    assert.truthy(out:find("status=0", 1, true), out)
    assert.truthy(out:find("pipeline total = 10", 1, true), out)
    assert.truthy(out:find("timer handler fired in a fiber", 1, true), out)
    assert.truthy(out:find("wait-for cycle", 1, true), out)
  end)
end)

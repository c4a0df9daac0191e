-- The fiber examples of docs/lua.md run as they stand; so does the luv one,
-- where luv is installed.
local function doc_path()
  local here = debug.getinfo(1, "S").source:match("^@(.*)/tests/lua/") or "."
  return here .. "/docs/lua.md"
end

describe("docs/lua.md", function()
  local f = assert(io.open(doc_path()))
  local text = f:read("a")
  f:close()
  local n, luv_blocks = 0, {}
  for block in text:gmatch("```lua\n(.-)```") do
    if block:find('require "luv"', 1, true) then
      luv_blocks[#luv_blocks + 1] = block
    elseif block:find("px%.run") then
      n = n + 1
      it("the_documented_example_runs #" .. n, function()
        local chunk = assert(load('local px = require "parataxis"\n' ..
          block:gsub('^local px = require "parataxis"\n', ''), "=docs/lua.md"))
        chunk()
      end)
    end
  end
  it("has_fiber_examples", function() assert.is_true(n >= 4) end)
  it("has_a_luv_example", function() assert.equal(1, #luv_blocks) end)

  local has_luv, uv = pcall(require, "luv")
  for i, block in ipairs(luv_blocks) do
    if not has_luv then
      pending("the_luv_example_runs #" .. i .. " (luv is not installed: apt-get install lua-luv)")
    else
      it("the_luv_example_runs #" .. i, function()
        -- A guard that does not keep the loop alive: should the example never
        -- close its handle, the loop is stopped and the test fails, not hangs.
        local stuck = false
        local guard = uv.new_timer()
        guard:start(10000, 0, function() stuck = true; uv.stop() end)
        guard:unref()
        local chunk = assert(load(block, "=docs/lua.md (luv)"))
        local ok, err = pcall(chunk)
        guard:close()
        uv.run("nowait")                    -- lets the guard's close complete
        assert(ok, err)
        assert.is_false(stuck, "the luv example's loop never ended")
      end)
    end
  end

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

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
end)

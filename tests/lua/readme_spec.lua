-- The Lua snippets of README.md run as they stand, each in a fresh lua5.4 with
-- this module's paths, and print what the README says they print.
local root = debug.getinfo(1, "S").source:match("^@(.*)/tests/lua/") or "."
local h = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "") .. "helpers.lua")

-- What each ```lua block prints, in README order.
local expected = { "42\n" }

local function run(block)
  local file = os.tmpname()
  local f = assert(io.open(file, "w"))
  f:write(block)
  f:close()
  local out = h.lua_child(h.with_paths(string.format("dofile(%q)", file)))
  os.remove(file)
  return out
end

describe("docs", function()
  local f = assert(io.open(root .. "/README.md"))
  local text = f:read("a")
  f:close()
  local blocks = {}
  for block in text:gmatch("```lua\n(.-)```") do blocks[#blocks + 1] = block end

  it("readme_has_as_many_lua_blocks_as_this_spec_knows", function()
    assert.equal(#expected, #blocks)
  end)
  for i, block in ipairs(blocks) do
    it("readme_lua_block_" .. i .. "_runs_and_prints_what_it_says", function()
      assert.equal((expected[i] or "?") .. "status=0\n", run(block))
    end)
  end
end)

-- make demo's Lua programs (docs/examples/*.lua), their stdout and stderr
-- piped together as `make demo | cat` shows them: each exits 0, stamps every
-- line after its first with the time, and prints the lines the C and Python
-- demos print too (tests/install/demo_c.sh, tests/python/test_demos.py).
local root = debug.getinfo(1, "S").source:match("^@(.*)/tests/lua/") or "."
local h = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "") .. "helpers.lua")

-- The lines the example `name` prints, then "status=N".
local function piped(name)
  local out = h.lua_child(h.with_paths(string.format("dofile(%q)", root .. "/docs/examples/" .. name)))
  local lines = {}
  for line in out:gmatch("(.-)\n") do lines[#lines + 1] = line end
  return lines
end

local function line_of(lines, text)
  for i, line in ipairs(lines) do
    if line:find(text, 1, true) then return i end
  end
  error("no line with '" .. text .. "':\n" .. table.concat(lines, "\n"))
end

describe("docs", function()
  it("the_timer_demo_prints_what_the_other_languages_print", function()
    local lines = piped("timer_demo.lua")
    assert.equal("status=0", table.remove(lines))
    assert.truthy(lines[1]:match("^parataxis .* from Lua$"), lines[1])
    for i = 2, #lines do
      assert.truthy(lines[i]:match("^ *%d+%.%d ms  "), "no time stamp: " .. lines[i])
    end
    for _, want in ipairs({ "cancel the 20 ms timer: true", "one-shot, 20 ms, cancelled   aborted",
                            "one-shot, 10 ms              expired", "one-shot, 30 ms              expired",
                            "periodic, tick 1", "periodic, tick 2", "periodic, tick 3",
                            "every handler ran exactly once; 0 pending" }) do
      line_of(lines, want)
    end
    assert.is_true(line_of(lines, "periodic, tick 3") < line_of(lines, "periodic, final call         aborted"))
    assert.is_true(line_of(lines, "cancel the 20 ms timer") < line_of(lines, "one-shot, 20 ms, cancelled"))
  end)

  it("the_fiber_demo_prints_what_the_other_languages_print_in_order", function()
    local lines = piped("fiber_demo.lua")
    assert.equal("status=0", table.remove(lines))
    for _, want in ipairs({ "left got 0", "right got 1", "pipeline total = 10",
                            "the mutex went to the fibers in the order they asked: 1, 2, 3, 4",
                            "fired at the interrupted wait" }) do
      line_of(lines, want)
    end
    for _, want in ipairs({ 'fiber 2 "transfer a->b": parked', 'waits on mutex "account b"@',
                            'held by fiber 3 "transfer b->a"' }) do
      line_of(lines, want)
    end
    local order = { line_of(lines, "timer handler fired in a fiber"), line_of(lines, "px.dump() while they wait"),
                    line_of(lines, "the engine's report"), line_of(lines, "deadlock detected"),
                    line_of(lines, "wait-for cycle") }
    for i = 2, #order do assert.is_true(order[i - 1] < order[i]) end
  end)

  it("the_io_demo_serves_its_clients_and_stops", function()
    local lines = piped("io_demo.lua")
    assert.equal("status=0", table.remove(lines))
    assert.truthy(lines[1]:match("^echo server on 127%.0%.0%.1, port %d+$"), lines[1])
    for i = 0, 2 do line_of(lines, string.format('client %d got back "hello from client %d"', i, i)) end
    assert.same({ "receive on a quiet socket for 20 ms: timeout",
                  'px.read_file on the blocking pool got "written on the pool"',
                  "server stopped: its listener was closed" }, { table.unpack(lines, #lines - 2) })
  end)
end)

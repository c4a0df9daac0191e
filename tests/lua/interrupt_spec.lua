-- Ctrl-C (SIGINT) during px.run: one signal ends the run promptly -- from the
-- kernel wait too -- after every fiber unwound through its <close> variables,
-- and px.run raises the interpreter's "interrupted!" error.  Each case runs a
-- child lua5.4 (the interpreter's own SIGINT handler is in place while it runs
-- a script), which writes "ready" once its fibers wait; the signal is sent
-- then, never after a sleep.
local px = require "parataxis"

-- Runs `script` in a child lua5.4, sends it SIGINT once its output has a
-- line "ready", and returns its output (stdout and stderr, with "rc=N" last)
-- and the seconds from the signal to its end.  A child still running 40 s on
-- is killed (rc=137): a run the signal did not end fails the test, not hangs it.
local function interrupt_child(script)
  local path, out = os.tmpname(), os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write("io.stdout:setvbuf('line')\n", script)
  f:close()
  local sh = string.format(
    "lua5.4 %s >%s 2>&1 & pid=$!; (sleep 40; kill -KILL $pid) >/dev/null 2>&1 & dog=$!; " ..
    "n=0; until grep -q '^ready$' %s || [ $n -ge 3000 ]; do sleep 0.01; n=$((n+1)); done; " ..
    "t0=$(date +%%s%%N); kill -INT $pid; wait $pid; rc=$?; t1=$(date +%%s%%N); " ..
    "kill $dog 2>/dev/null; " ..
    "cat %s; echo \"rc=$rc\"; echo \"took=$(( (t1 - t0) / 1000000 ))\"",
    path, out, out, out)
  local p = assert(io.popen(sh))
  local text = p:read("a")
  p:close()
  os.remove(path)
  os.remove(out)
  local took = tonumber(text:match("took=(%d+)")) / 1000
  return text, took
end

-- Generous: the fibers' sleeps are 60 s; a prompt end is well under 10 s.
local PROMPT = 10

-- The child caught the interrupt (pcall printed "interrupted!"), ended
-- normally, and promptly.
local function caught_promptly(out, took)
  assert.truthy(out:find("pcall\tfalse\t[^\n]*interrupted!\n"), out)
  assert.truthy(out:find("rc=0\n", 1, true), out)
  assert.is_true(took < PROMPT, out)
end

describe("fiber", function()
  it("sigint_during_run_ends_a_run_of_fibers_sleeping_in_a_loop_unwinding_each_and_raises_interrupted", function()
    local out, took = interrupt_child([[
local px = require "parataxis"
local ok, err = pcall(px.run, function()
  for i = 1, 3 do
    px.spawn(function()
      local c <close> = setmetatable({}, { __close = function() print("closed " .. i) end })
      while true do px.sleep(0.001 * i) end
    end)
  end
  local c <close> = setmetatable({}, { __close = function() print("closed main") end })
  px.sleep(0.01)
  print("ready")
  px.sleep(60)
end)
print("pcall", ok, err)
print("after the run")
]])
    for _, name in ipairs({ "closed 1", "closed 2", "closed 3", "closed main" }) do
      assert.truthy(out:find(name .. "\n", 1, true), out)
    end
    assert.truthy(out:find("after the run\n", 1, true), out)   -- one error, not a second
    caught_promptly(out, took)
  end)

  it("sigint_during_run_ends_the_kernel_wait_of_a_lone_sleep_at_once", function()
    local out, took = interrupt_child([[
local px = require "parataxis"
local ok, err = pcall(px.run, function()
  print("ready")
  px.sleep(60)
  print("slept")
end)
print("pcall", ok, err)
]])
    assert.is_nil(out:find("slept", 1, true), out)
    caught_promptly(out, took)
  end)

  it("sigint_during_run_stops_a_fiber_that_never_waits", function()
    local out, took = interrupt_child([[
local px = require "parataxis"
local ok, err = pcall(px.run, function()
  local f = px.spawn(function()
    local c <close> = setmetatable({}, { __close = function() print("busy closed") end })
    print("ready")
    local n = 0
    while true do n = n + 1 end
  end)
  print("joined", pcall(f.join, f))
end)
print("pcall", ok, err)
]])
    assert.truthy(out:find("busy closed\n", 1, true), out)
    -- The run is cancelled in the turn the busy fiber stops, before its end:
    -- main's join is interrupted first and says so, as a C joiner's does.
    assert.truthy(out:find("joined\tfalse\t[^\n]*cancelled %(ECANCELED%)\n"), out)
    caught_promptly(out, took)
  end)

  it("sigint_during_run_raises_once_when_px_run_was_called_from_a_coroutine", function()
    -- the interpreter's handler sets its hook on the main thread, not the caller's
    local out, took = interrupt_child([[
local px = require "parataxis"
local run = coroutine.wrap(function()
  return pcall(px.run, function() print("ready"); px.sleep(60) end)
end)
print("pcall", run())
for _ = 1, 10 do local _ = tostring(1) end
print("after the run")
]])
    assert.truthy(out:find("after the run\n", 1, true), out)
    caught_promptly(out, took)
  end)

  it("sigint_during_run_ends_the_script_with_the_interpreters_error_when_nothing_catches_it", function()
    local out, took = interrupt_child([[
local px = require "parataxis"
px.run(function()
  px.spawn(function() px.sleep(60) end)
  print("ready")
  px.sleep(60)
end)
print("returned")
]])
    assert.is_nil(out:find("returned", 1, true), out)
    assert.truthy(out:find("interrupted!", 1, true), out)
    assert.truthy(out:find("rc=1\n", 1, true), out)
    assert.is_true(took < PROMPT, out)
  end)

  it("sigint_during_run_leaves_a_timer_queues_held_run_and_its_queue_usable", function()
    local out, took = interrupt_child([[
local px = require "parataxis"
local q = px.TimerQueue()
local ok, err = pcall(px.run, function()
  local on = px.TimerQueue{ executor = px.scheduler() }
  on:add(60, function(aborted) print("handler", aborted) end)
  print("ready")
  px.sleep(60)
end)
print("pcall", ok, err)
local fired = false
q:add(0, function() fired = true end)
q:run(5)
print("queue after", fired)
print("run after", px.run(function() px.sleep(0.001); return "again" end))
q:close()
]])
    assert.truthy(out:find("queue after\ttrue\n", 1, true), out)
    assert.truthy(out:find("run after\tagain\n", 1, true), out)
    caught_promptly(out, took)
  end)

  it("sigint_during_run_starts_the_aborted_call_of_a_queue_closed_while_the_run_unwinds_once", function()
    -- the interpreter's hook on the main thread must be off once the run acts
    -- on the signal: the call's fiber starts there, and a new coroutine
    -- inherits that thread's hook
    local out, took = interrupt_child([[
warn("@on")
local px = require "parataxis"
local ok, err = pcall(px.run, function()
  px.spawn(function()
    local q <close> = px.TimerQueue{ executor = px.scheduler() }
    q:add(60, function(aborted) print("handler", aborted) end)
    print("ready")    -- here, not in main: a signal before this fiber ran found no queue
    px.sleep(60)
  end)
  px.sleep(60)
end)
print("pcall", ok, err)
]])
    local _, calls = out:gsub("handler\t", "")
    assert.equal(1, calls, out)
    assert.truthy(out:find("handler\ttrue\n", 1, true), out)
    assert.is_nil(out:find("Lua warning", 1, true), out)
    caught_promptly(out, took)
  end)
end)

describe("fiber", function()
  it("run_without_an_interrupt_keeps_sigints_disposition_a_run_in_a_process_that_has_no_handler", function()
    -- busted has none: the run changes nothing and ends as before.
    assert.equal("done", px.run(function() px.sleep(0.001); return "done" end))
  end)
end)

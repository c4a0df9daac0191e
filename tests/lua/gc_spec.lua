-- The Lua binding's dropped queues: a TimerQueue only collected, never closed,
-- still calls every handler it accepted once; and a process that ends with live
-- queues ends cleanly, saying so where it cannot deliver.
local px = require "parataxis"

-- Makes a queue in a frame of its own, so that no register of the caller keeps
-- it reachable; setup(q) adds its timers.  Returns a weak table that holds the
-- queue until it is collected.
local function drop_queue(setup)
  local weak = setmetatable({}, { __mode = "v" })
  ;(function()
    local q = px.TimerQueue()
    setup(q)
    weak.q = q
  end)()
  return weak
end

local function full_gc()
  collectgarbage()
  collectgarbage()
end

-- Replaces warn() while fn runs; returns what was warned, one string a call.
local function capture_warnings(fn)
  local warnings = {}
  local real_warn = _G.warn
  _G.warn = function(...) warnings[#warnings + 1] = table.concat({ ... }) end
  local ok, err = pcall(fn)
  _G.warn = real_warn
  assert(ok, err)
  return warnings
end

describe("timerq", function()
  it("dropped_without_close_delivers_every_owed_call_as_aborted_when_collected", function()
    local calls = {}
    local weak = drop_queue(function(q)
      for i = 1, 3 do q:add(60, function(a) calls[#calls + 1] = { "once" .. i, a } end) end
      q:add_periodic(60, 1, function(a) calls[#calls + 1] = { "periodic", a } end)
      q:add(0, function(a) calls[#calls + 1] = { "due", a } end)
      -- Until the due one is queued: a call already handed over is owed too.
      local deadline = px.now() + 5
      while q.core:size() < 1 and px.now() < deadline do q.core:wait(0.01) end
      assert.equal(1, q.core:size())
    end)
    assert.same({}, calls)
    full_gc()
    assert.is_nil(weak.q, "the queue was not collected")
    table.sort(calls, function(x, y) return x[1] < y[1] end)
    assert.same({
      { "due", true }, { "once1", true }, { "once2", true }, { "once3", true },
      { "periodic", true },
    }, calls)
    full_gc()
    assert.equal(5, #calls)                  -- once each, not again
  end)

  it("dropped_without_close_is_collected_although_its_handlers_capture_it_a_cycle", function()
    local calls = 0
    local weak = drop_queue(function(q)
      for _ = 1, 4 do
        q:add(60, function(a)
          assert(q:pending() == 0)             -- the queue, from its own handler
          if a then calls = calls + 1 end
        end)
      end
    end)
    full_gc()
    assert.is_nil(weak.q, "the queue was not collected")
    assert.equal(4, calls)
  end)

  it("dropped_without_close_reports_handler_errors_with_warn_and_still_runs_the_other_calls", function()
    local calls = 0
    local weak
    local warnings = capture_warnings(function()
      weak = drop_queue(function(q)
        q:add(60, function() error("first boom", 0) end)
        q:add(60, function() calls = calls + 1 end)
        q:add(60, function() error({}) end)
        q:add(60, function() calls = calls + 1 end)
      end)
      full_gc()
    end)
    assert.is_nil(weak.q)
    assert.equal(2, calls)
    assert.equal(2, #warnings)
    local all = table.concat(warnings, "\n")
    assert.truthy(all:find("first boom", 1, true), all)
    assert.truthy(all:find("collected", 1, true), all)
  end)

  it("dropped_without_close_refuses_an_add_from_a_handler_run_at_collection", function()
    local refused, ran_later = false, false
    local warnings = capture_warnings(function()
      drop_queue(function(q)
        q:add(60, function()
          refused = not pcall(q.add, q, 0, function() ran_later = true end)
        end)
      end)
      full_gc()
    end)
    assert.is_true(refused)
    assert.is_false(ran_later)
    assert.same({}, warnings)
  end)

  it("dropped_without_close_kept_by_a_handler_at_collection_is_a_closed_queue_safe_to_use", function()
    local kept
    drop_queue(function(q)
      q:add(60, function() kept = q end)
    end)
    full_gc()
    assert.is_not_nil(kept, "the handler did not run")
    full_gc()                                -- its C object is gone by now
    assert.equal(0, kept:pending())
    assert.equal(0, kept:cancel_all())
    assert.is_false(kept:cancel(1))
    assert.equal(0, kept:run(0))
    assert.equal(0, kept:run())
    assert.equal(0, kept:drain())
    assert.has_error(function() kept:add(0, function() end) end)
    kept:close()
    kept = nil
    full_gc()
  end)

  it("dropped_without_close_closed_before_it_was_dropped_calls_nothing_again", function()
    local calls = 0
    drop_queue(function(q)
      q:add(60, function() calls = calls + 1 end)
      q:close()
    end)
    assert.equal(1, calls)
    full_gc()
    assert.equal(1, calls)
  end)
end)

-- Runs `script` in a child lua5.4 (the module paths are inherited); returns its
-- stdout and stderr together, its exit status and how long it took.  `timeout`
-- kills a child that hangs; `env`, if given, is put before the command
-- (assignments of environment variables, already quoted for the shell).
local function child(script, env)
  local t0 = px.now()
  local p = assert(io.popen(string.format(
    "%s timeout 30 lua5.4 -e %q 2>&1; echo \"rc=$?\"", env or "", script)))
  local out = p:read("a")
  p:close()
  local rc = tonumber(out:match("rc=(%d+)%s*$"))
  return out, rc, px.now() - t0
end

local PRELUDE = table.concat({
  'local px = require "parataxis"',
  'local function say(what) return function(a) io.write(what, ":", tostring(a), "\\n") end end',
}, " ")

describe("timerq", function()
  it("a_process_ending_with_a_live_queue_delivers_the_owed_calls_when_the_script_ends_lua_close", function()
    local out, rc = child(PRELUDE .. [[
      Q = px.TimerQueue()
      Q:add(60, say("once"))
      Q:add_periodic(60, 1, say("periodic"))
    ]])
    assert.equal(0, rc, out)
    assert.truthy(out:find("once:true", 1, true), out)
    assert.truthy(out:find("periodic:true", 1, true), out)
    assert.is_nil(out:find("parataxis:", 1, true), out)
  end)

  it("a_process_ending_with_a_live_queue_delivers_the_owed_calls_on_os_exit_code_true", function()
    local out, rc = child(PRELUDE .. [[
      Q = px.TimerQueue()
      Q:add(60, say("once"))
      os.exit(3, true)
    ]])
    assert.equal(3, rc, out)
    assert.truthy(out:find("once:true", 1, true), out)
    assert.is_nil(out:find("parataxis:", 1, true), out)
  end)

  it("a_process_ending_with_a_live_queue_exits_cleanly_on_os_exit_code_and_warns_of_the_calls_it_cannot_deliver", function()
    local out, rc, took = child(PRELUDE .. [[
      Q = px.TimerQueue()
      Q:add(60, say("once"))
      Q:add(60, say("once"))
      Q:add(0, say("due"))
      EMPTY = px.TimerQueue()
      local deadline = px.now() + 5
      while Q.core:size() == 0 and px.now() < deadline do Q.core:wait(0.01) end
      os.exit(5)
    ]])
    assert.equal(5, rc, out)
    assert.is_true(took < 20, "took " .. took .. " s")
    assert.is_nil(out:find("once:", 1, true), out)
    -- One line, for the queue that owed calls; none for the empty one.
    local _, lines = out:gsub("parataxis: [^\n]*not closed[^\n]*\n", "")
    assert.equal(1, lines, out)
    assert.is_nil(out:find("due:", 1, true), out)
    assert.truthy(out:find("2 timers pending and 1 calls queued", 1, true), out)
  end)

  it("a_process_ending_with_a_live_queue_exits_cleanly_on_os_exit_while_many_workers_fire", function()
    local out, rc, took = child(PRELUDE .. [[
      QS = {}
      for i = 1, 8 do
        local q = px.TimerQueue()
        for _ = 1, 50 do q:add_periodic(0, 0.0005, function() end) end
        QS[i] = q
      end
      for _ = 1, 20 do for _, q in ipairs(QS) do q:run(0.001) end end
      os.exit(0)
    ]])
    assert.equal(0, rc, out)
    assert.is_true(took < 20, "took " .. took .. " s")
  end)

  it("a_process_ending_with_a_live_queue_stops_a_queue_made_while_the_state_closes_and_warns", function()
    -- At lua_close, a handler run by the finalizer makes a queue that Lua will
    -- never finalize; the module is unloaded next.
    local out, rc = child(PRELUDE .. [[
      Q = px.TimerQueue()
      Q:add(60, function()
        LATE = px.TimerQueue()
        LATE:add_periodic(0, 0.0005, function() end)
      end)
    ]])
    assert.equal(0, rc, out)
    local _, lines = out:gsub("parataxis: [^\n]*not closed[^\n]*\n", "")
    assert.equal(1, lines, out)
  end)

  -- The worker takes a due timer out of its set, then posts its call: between
  -- the two the timer was neither pending nor queued, and a hook that counted
  -- then found nothing owed and said nothing (the test above, in a few runs
  -- of 300).  exit_race_shim.c holds the worker in that gap while the hook
  -- counts.
  it("a_process_ending_with_a_live_queue_warns_of_a_queue_whose_due_call_its_worker_is_posting_as_the_process_ends", function()
    local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
    local module = package.searchpath("parataxis_core", package.cpath)
    local shim = os.tmpname()
    local built = os.execute(string.format("cc -shared -fPIC -o %q %q -ldl 2>/dev/null",
                                           shim, here .. "/exit_race_shim.c"))
    if not built or not module then
      os.remove(shim)
      pending("no C compiler, or no parataxis_core.so on package.cpath")
      return
    end
    local out, rc = child(PRELUDE .. [[
      Q = px.TimerQueue()
      Q:add(0, say("due"))
      local deadline = px.now() + 5
      while Q.core:pending() ~= 0 and px.now() < deadline do Q.core:wait(0.01) end
      os.exit(0)
    ]], string.format("PX_SHIM_MODULE=%q LD_PRELOAD=%q", module, shim))
    os.remove(shim)
    assert.equal(0, rc, out)
    assert.is_nil(out:find("due:", 1, true), out)
    assert.truthy(out:find("0 timers pending and 1 calls queued", 1, true), out)
  end)
end)

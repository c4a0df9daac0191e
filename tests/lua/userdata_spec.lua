-- Foreign values where the binding expects its own: every entry of the SWIG
-- module parataxis_core checks its arguments (a crash would end the process,
-- so each sweep runs in a child lua5.4 and reports what every call raised),
-- and every TimerQueue method called on something else raises EINVAL, as the
-- fiber and sync methods do.
local px = require "parataxis"

-- Runs `body` in a fresh interpreter after a prelude that defines the
-- foreign values and probe(name, fn, ...): one line per probe, "ok <name>"
-- when fn raised a string or an error object (never a crash), "RETURNED
-- <name>" when it returned.  The last line is "done".
local PRELUDE = [[
local px = require "parataxis"
local core = require "parataxis_core"
local q = px.TimerQueue()
local foreign = {
  stdout = io.stdout, mutex = px.mutex(), token = px.token(), event = px.event(),
  channel = px.channel(1), ["nil"] = false, table = {}, number = 7, str = "x",
  fn = print, closed_file = io.tmpfile(),
}
foreign.closed_file:close()
px.run(function()
  foreign.fiber = px.spawn(function() end)
  foreign.scheduler = px.scheduler()
end)
local function probe(name, fn, ...)
  local ok, err = pcall(fn, ...)
  if ok then print("RETURNED " .. name)
  elseif type(err) == "string" or px.is_error(err) then print("ok " .. name)
  else print("ODD " .. name .. " " .. type(err)) end
end
local function each_foreign(f)
  for k, v in pairs(foreign) do
    if v == false then v = nil end
    f(k, v)
  end
end
]]

local function child(body)
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(PRELUDE, body, '\nq:close()\nprint("done")\n')
  f:close()
  local p = assert(io.popen(string.format("timeout 60 lua5.4 %s 2>&1; echo \"status=$?\"",
                                          path)))
  local out = p:read("a")
  p:close()
  os.remove(path)
  return out
end

local CORE_METHODS = {
  { "add", 1.0, 1 }, { "add_periodic", 1.0, 1.0, 1 }, { "cancel", 1 }, { "cancel_all" },
  { "pending" }, { "fileno" }, { "wait", 0 }, { "size" }, { "take" }, { "closed" },
  { "ident" }, { "shutdown" }, { "close" },
}

-- The probe lines of `out` that are not "ok": what crashed or went through.
local function not_ok(out)
  local bad = {}
  for line in out:gmatch("[^\n]+") do
    if line:match("^RETURNED") or line:match("^ODD") then bad[#bad + 1] = line end
  end
  return bad
end

local function assert_clean(out, nprobes)
  assert.truthy(out:find("\ndone\nstatus=0\n", 1, true), out)
  assert.same({}, not_ok(out))
  local n = select(2, out:gsub("\nok ", "\n"))
  assert.is_true(n >= nprobes, out)
end

describe("userdata", function()
  it("every_core_method_refuses_a_foreign_self_with_an_error", function()
    local body = { "local methods = {" }
    for _, m in ipairs(CORE_METHODS) do
      local args = {}
      for i = 2, #m do args[#args + 1] = tostring(m[i]) end
      body[#body + 1] = string.format("{ %q, { %s } },", m[1], table.concat(args, ", "))
    end
    body[#body + 1] = [==[}
for _, m in ipairs(methods) do
  each_foreign(function(k, v)
    probe(m[1] .. "(" .. k .. ")", q.core[m[1]], v, table.unpack(m[2]))
  end)
end]==]
    assert_clean(child(table.concat(body, "\n")), #CORE_METHODS * 12)
  end)

  it("core_refuses_a_foreign_value_in_place_of_a_number_or_a_scheduler", function()
    local out = child([[
each_foreign(function(k, v)
  if type(v) ~= "number" then
    probe("add delay " .. k, q.core.add, q.core, v, 1)
    probe("add key " .. k, q.core.add, q.core, 1.0, v)
    probe("cancel id " .. k, q.core.cancel, q.core, v)
    probe("wait " .. k, q.core.wait, q.core, v)
  end
  if k ~= "scheduler" then probe("queue_on " .. k, core.queue_on, v) end
end)]])
    assert_clean(out, 4 * 10)
  end)

  it("a_queues_core_compared_with_a_foreign_userdata_is_false_in_either_order", function()
    local out = child([[
each_foreign(function(k, v)
  print(k, q.core == v, v == q.core)
end)
print("self", q.core == q.core)]])
    assert.truthy(out:find("\ndone\nstatus=0\n", 1, true), out)
    assert.truthy(out:find("stdout\tfalse\tfalse", 1, true), out)
    assert.truthy(out:find("mutex\tfalse\tfalse", 1, true), out)
    assert.truthy(out:find("self\ttrue", 1, true), out)
  end)

  it("swigs_global_helpers_and_the_classs_metamethods_take_no_foreign_userdata", function()
    local out = child([[
each_foreign(function(k, v)
  if swig_type then probe("swig_type " .. k, function() return assert(nil, swig_type(v)) end) end
  if swig_equals then
    probe("swig_equals " .. k, function() assert(not swig_equals(v, q.core)); error("x") end)
  end
  local mt = getmetatable(q.core)
  if type(mt) == "table" then
    for name, f in pairs(mt) do
      if type(f) == "function" then probe(name .. " " .. k, f, v, "add") end
    end
  end
end)]])
    assert_clean(out, 0)
  end)
end)

describe("userdata", function()
  -- getmetatable(m).__gc(io.stdout) is plain Lua: a finalizer or __tostring
  -- called by hand reads only its own kind of object.
  it("fiber_metamethods_refuse_or_ignore_a_value_of_another_kind", function()
    local out = child([==[
local objects = {
  mutex = px.mutex(), rwlock = px.rwlock(), waitgroup = px.waitgroup(),
  barrier = px.barrier(2), once = px.once(), semaphore = px.semaphore(), event = px.event(),
  channel = px.channel(), token = px.token(), fiber = foreign.fiber,
  scheduler = foreign.scheduler,
}
for kind, obj in pairs(objects) do
  local mt = getmetatable(obj)
  if type(mt) == "table" then
    for name, f in pairs(mt) do
      if type(f) == "function" then
        each_foreign(function(k, v)
          if k ~= kind and getmetatable(v) ~= mt then
            local ok = pcall(f, v)
            print("ok " .. kind .. "." .. name .. "(" .. k .. ")")
          end
        end)
      end
    end
  end
end
-- the objects still work
px.run(function()
  local g <close> = objects.mutex:guard()
  objects.channel:close()
  print("still", objects.token:cancel(), objects.event:set())
end)]==])
    assert.truthy(out:find("\ndone\nstatus=0\n", 1, true), out)
    assert.truthy(out:find("ok mutex.__gc(stdout)", 1, true), out)
    assert.truthy(out:find("ok token.__gc(mutex)", 1, true), out)
    assert.truthy(out:find("ok scheduler.__gc(stdout)", 1, true), out)
    assert.truthy(out:find("still\ttrue", 1, true), out)
  end)
end)

describe("userdata", function()
  -- as one resurrected by another finalizer sees it, or after __gc by hand
  it("an_object_whose_finalizer_ran_answers_each_method_with_a_value_or_an_error", function()
    local out = child([==[
local objs = { px.mutex(), px.rwlock(), px.waitgroup(), px.barrier(2), px.once(),
               px.semaphore(), px.event(), px.channel(1), px.token(), foreign.scheduler }
for _, o in ipairs(objs) do getmetatable(o).__gc(o) end
px.run(function()
  for _, o in ipairs(objs) do
    for name, f in pairs(getmetatable(o).__index) do
      if type(f) == "function" and name ~= "values" then probe(name, function() f(o, 1); error("x") end) end
    end
  end
end)
print("queue_on", pcall(px.TimerQueue, { executor = foreign.scheduler }))]==])
    assert.truthy(out:find("\ndone\nstatus=0\n", 1, true), out)
    assert.same({}, not_ok(out))
  end)
end)

describe("userdata", function()
  local q
  before_each(function() q = px.TimerQueue() end)
  after_each(function() q:close() end)

  local METHODS = {
    { "add", 1, function() end }, { "add_periodic", 1, 1, function() end }, { "cancel", 1 },
    { "cancel_all" }, { "pending" }, { "fileno" }, { "drain" }, { "run", 0 }, { "close" },
  }

  it("timerqueue_methods_called_on_something_else_raise_einval_naming_the_method", function()
    local others = { io.stdout, px.mutex(), px.token(), {}, 7, "x", { core = q.core } }
    for _, m in ipairs(METHODS) do
      local fn = q[m[1]]
      for i = 0, #others do
        local self = others[i]          -- others[0]: nil
        local ok, err = pcall(fn, self, select(2, table.unpack(m)))
        assert.is_false(ok, m[1])
        assert.is_true(px.is_error(err, "EINVAL"), m[1] .. ": " .. tostring(err))
        assert.truthy(tostring(err):find("TimerQueue:" .. m[1], 1, true), tostring(err))
      end
    end
    -- and the queue itself is untouched
    assert.equal(0, q:pending())
  end)

  it("the_lua_side_sync_methods_called_on_something_else_raise_einval_too", function()
    local calls = {
      { px.mutex().guard }, { px.rwlock().read_guard }, { px.rwlock().write_guard },
      { px.semaphore().guard }, { px.once().call, print }, { px.channel().values },
    }
    px.run(function()
      for i, c in ipairs(calls) do
        for _, other in ipairs({ io.stdout, {}, px.token() }) do
          local ok, err = pcall(function()
            for _ in c[1](other, c[2]) do end       -- values' iterator: its first recv
          end)
          assert.is_false(ok, i)
          assert.is_true(px.is_error(err, "EINVAL"), i .. ": " .. tostring(err))
        end
      end
    end)
  end)

  it("a_luv_timers_methods_called_on_something_else_raise_einval_too", function()
    local t = px.timer(q)
    for _, name in ipairs({ "start", "stop", "again", "close", "get_repeat" }) do
      local ok, err = pcall(t[name], io.stdout, 0.1, 0, function() end)
      assert.is_false(ok, name)
      assert.is_true(px.is_error(err, "EINVAL"), name .. ": " .. tostring(err))
    end
    t:close()
  end)
end)

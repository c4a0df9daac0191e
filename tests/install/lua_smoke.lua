-- The installed Lua module works, and comes from the directory arg[1]: lua5.4
-- lua_smoke.lua ROOT.  No library beside the module is needed (the core is
-- linked into parataxis_core.so).
local root = assert(arg[1], "usage: lua5.4 lua_smoke.lua ROOT")
for _, m in ipairs({ { "parataxis", package.path }, { "parataxis.timer", package.path },
                     { "parataxis_core", package.cpath } }) do
  local file = package.searchpath(m[1], m[2])
  assert(file and file:sub(1, #root + 1) == root .. "/",
         m[1] .. " found at " .. tostring(file) .. ", not under " .. root)
end

local px = require "parataxis"
assert(type(px.version) == "string")
local q <close> = px.TimerQueue()
local seen = {}
q:add(0.001, function(aborted) seen[#seen + 1] = aborted end)
local t = px.timer(q)
t:start(0.001, 0.001, function(tt) seen[#seen + 1] = "tick"; if #seen >= 3 then tt:stop() end end)
local deadline = px.now() + 20
while (#seen < 3 or t:is_active()) and px.now() < deadline do q:run(0.05) end
assert(#seen == 3 and not t:is_active(), "handlers did not run")
print("parataxis " .. px.version .. " from " .. root .. ": ok")

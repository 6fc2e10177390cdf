-- HTTP pipelining for wrk, as in TechEmpower's plaintext test: every write carries
-- `depth` requests (the first script argument, default 16) and wrk counts each response.
-- Usage: wrk -t1 -c64 -d3s -s bench/pipeline.lua http://127.0.0.1:8080/ -- 16
init = function(args)
  local depth = tonumber(args[1]) or 16
  local r = {}
  for i = 1, depth do
    r[i] = wrk.format()
  end
  req = table.concat(r)
end

request = function()
  return req
end

-- Shared by the scripts that need it (scripts.go puts it among their helpers, defined once per
-- script call): the bucket and the sliding window.
--
-- muldiv returns floor(a*b/c) and a*b mod c, exactly, for integers a, b >= 0 and c > 0
-- whose quotient is below 2^53 (the mulDiv of package algorithm); below 2^52 a product is
-- exact and one division does (Dekker's two-product corrects the rest).
local function muldiv(a, b, c)
  local p = a * b
  local q = floor(p / c)
  local r
  if p < EXACT then
    r = p - q * c
  else
    local qc = q * c
    local x = 134217729 * a
    local ah = x - (x - a)
    x = 134217729 * b
    local bh = x - (x - b)
    local pe = ((ah * bh - p) + ah * (b - bh) + (a - ah) * bh) + (a - ah) * (b - bh)
    x = 134217729 * q
    local qh = x - (x - q)
    x = 134217729 * c
    local ch = x - (x - c)
    local qe = ((qh * ch - qc) + qh * (c - ch) + (q - qh) * ch) + (q - qh) * (c - ch)
    r = (p - qc) + (pe - qe)
  end
  while r < 0 do q = q - 1; r = r + c end
  while r >= c do q = q + 1; r = r - c end
  return q, r
end

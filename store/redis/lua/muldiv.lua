-- muldiv returns floor(a*b/c) and a*b mod c, exactly, for integers a, b >= 0 and c > 0
-- whose quotient is below 2^53 (the mulDiv of package algorithm); below 2^52 a product is
-- exact and one division does (Dekker's two-product corrects the rest). The generator (see
-- prelude.lua) puts the function among the helpers of the scripts calling it (the bucket and
-- the sliding window), defined once per script call, and splices the snippet below inline
-- where a line holds "--@muldiv(q, r, a, b, c)" (GCRA, whose path defines no function).
local function muldiv(a, b, c)
  local q, r
  --@muldiv(q, r, a, b, c)
  return q, r
end

-- muldiv(q, r, a, b, c) sets the variables q and r to floor(a*b/c) and a*b mod c.
--@define muldiv(q, r, a, b, c)
do
  local p = a * b
  q = floor(p / c)
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
end
--@end

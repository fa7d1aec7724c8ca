-- Release a lease (sluice.Leaser.ReleaseLease): remove X1 from the key's leases. Idempotent: a
-- released or expired id is simply absent, and no other lease is touched. Reply: 1 if it was
-- held, else 0.
return redis.call('ZREM', key, X1)

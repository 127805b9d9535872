-- The payments ledger of the payments-ledger example (and of onceflow's demo and tests): accounts with
-- balances, and the effect function that onceflow's PostgreSQL sink calls once per new message id
-- (postgres.effect.function = ledger.apply_payment). Safe to run again.
--
-- The function's contract (docs/effects.md):
--   * deterministic in (message_id, payload) and the database state; no side effects outside the
--     database (no HTTP, no dblink, no NOTIFY that someone acts on), no COMMIT, no session state;
--   * a business rejection is a result, not an error: {"status": "rejected", "reason": "..."}, and
--     it changes nothing;
--   * anything else it returns means applied; an error it raises on a row (RAISE, a bad cast, a
--     CHECK) marks that message failed with the error text, and the rest of the batch goes on;
--     a transient error (lock timeout, serialization failure, deadlock) is retried.
CREATE SCHEMA IF NOT EXISTS ledger;

CREATE TABLE IF NOT EXISTS ledger.accounts (
    id bigint PRIMARY KEY,
    opening_balance numeric(18, 2) NOT NULL,
    balance numeric(18, 2) NOT NULL CHECK (balance >= 0)
);

-- A payment debits its account ("user_id") by its "amount". Orders are not the ledger's business:
-- applied, with no change.
CREATE OR REPLACE FUNCTION ledger.apply_payment(message_id text, payload jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    account bigint;
    amount numeric(18, 2);
    new_balance numeric(18, 2);
BEGIN
    IF payload->>'type' IS DISTINCT FROM 'payment' THEN
        RETURN jsonb_build_object('status', 'applied', 'change', 'none');
    END IF;
    account := (payload->>'user_id')::bigint;
    amount := (payload->>'amount')::numeric(18, 2);
    IF amount IS NULL OR amount <= 0 THEN
        RETURN jsonb_build_object('status', 'rejected', 'reason', 'invalid amount');
    END IF;
    UPDATE ledger.accounts SET balance = balance - amount
        WHERE id = account AND balance >= amount
        RETURNING balance INTO new_balance;
    IF FOUND THEN
        RETURN jsonb_build_object('status', 'applied', 'account', account, 'amount', amount, 'balance', new_balance);
    END IF;
    IF EXISTS (SELECT 1 FROM ledger.accounts WHERE id = account) THEN
        RETURN jsonb_build_object('status', 'rejected', 'reason', 'insufficient funds', 'account', account,
            'amount', amount);
    END IF;
    RETURN jsonb_build_object('status', 'rejected', 'reason', 'unknown account', 'account', account,
        'amount', amount);
END
$$;

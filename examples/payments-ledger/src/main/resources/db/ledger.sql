-- The payments ledger of the payments-ledger example (and of onceflow's demo and tests): accounts with
-- balances, a double-entry journal, and the effect function that onceflow's PostgreSQL sink calls once
-- per new message id (postgres.effect.function = ledger.apply_payment). Run it as the role that owns
-- the ledger (not the job's role: db/grants.sql gives that one what it needs). Safe to run again.
--
-- The function's contract (docs/effects.md):
--   * deterministic in (message_id, payload) and the database state; no side effects outside the
--     database (no HTTP, no dblink, no NOTIFY that someone acts on), no COMMIT, no session state;
--   * a business rejection is a result, not an error: {"status": "rejected", "reason": "..."}, and
--     it changes nothing;
--   * anything else it returns means applied; an error it raises on a row (RAISE, a bad cast, a
--     CHECK) marks that message failed with the error text, and the rest of the batch goes on;
--     a transient error (lock timeout, serialization failure, deadlock) is retried.
--
-- Messages (the amount as a JSON number or string, at most two decimals, never rounded):
--   {"type": "payment", "user_id": 42, "amount": 12.34, "currency": "RUB"}
--       money leaves account 42 for the outside world (account 0, below);
--   an optional "fee": "0.50" on a payment or a transfer is debited too and credited to the fee
--       account (ledger.fee_account(), below);
--   {"type": "transfer", "transfer_from": 42, "transfer_to": 7, "amount": "12.34", "currency": "RUB"}
--       money moves from account 42 to account 7;
--   {"type": "order", ...} is not the ledger's business: applied, with no change.
-- Any other type is rejected ("unknown type"), never applied: a typo or a new kind of message must not
-- be recorded as done with no money moved.
CREATE SCHEMA IF NOT EXISTS ledger;

CREATE TABLE IF NOT EXISTS ledger.accounts (
    id bigint PRIMARY KEY CHECK (id > 0),
    opening_balance numeric(18, 2) NOT NULL,
    balance numeric(18, 2) NOT NULL CHECK (balance >= 0),
    currency char(3) NOT NULL DEFAULT 'RUB'
);

-- Every applied payment or transfer writes two lines, a debit (negative) and a credit (positive), whose
-- amounts sum to zero per message id, so for each account: opening_balance + sum(its lines) = balance.
-- Account 0 is the outside world (payments leave the ledger there): it has no row in ledger.accounts
-- and its balance is only ever derived by a query, so no effect updates one shared row (a row every
-- payment updated would serialise all effects of all subtasks).
-- One line per (message, account, leg): a message posted twice, by whatever path (a purged inbox row
-- and a redelivery, a re-drive by hand, a bug), fails loudly on this key instead of moving money twice;
-- onceflow records that message's effect as failed (SQLSTATE 23505) for an operator to look at.
CREATE TABLE IF NOT EXISTS ledger.journal (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    message_id text NOT NULL,
    account bigint NOT NULL CHECK (account >= 0),
    leg text NOT NULL CHECK (leg IN ('debit', 'credit')),
    amount numeric(18, 2) NOT NULL CHECK (amount <> 0 AND (amount < 0) = (leg = 'debit')),
    currency char(3) NOT NULL,
    -- when the effect's transaction posted it (the transaction's start: one time for both lines)
    posted_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (message_id, account, leg)
);

-- The fee account: every fee is credited to it, so it is the hottest account of the ledger. Like the
-- outside world it has no row in ledger.accounts and no effect ever updates a row of it: a fee is one
-- more journal line (an INSERT, which locks nothing another effect needs), and its balance is derived:
--   SELECT sum(amount) FROM ledger.journal WHERE account = ledger.fee_account();
-- A balance row that every fee updated would serialise every effect that charges one, at any parallelism.
CREATE OR REPLACE FUNCTION ledger.fee_account() RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$ SELECT 900000000000000000::bigint $$;
-- An account id as the ledger spells it (a JSON number or string of digits), or NULL: a malformed id
-- is rejected as a result rather than failing the message with a cast error.
CREATE OR REPLACE FUNCTION ledger.account_id(value jsonb) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN jsonb_typeof(value) IN ('number', 'string') AND value #>> '{}' ~ '^[0-9]{1,18}$'
        THEN (value #>> '{}')::bigint END
$$;

-- The accounts a message's effect touches, as text: one for a payment, two for a transfer, none for
-- anything else. For postgres.effect.keys, whose locks keep two transfers A->B and B->A from deadlocking.
CREATE OR REPLACE FUNCTION ledger.payment_accounts(message_id text, payload jsonb) RETURNS text[]
LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(array_agg(DISTINCT account::text), '{}') FROM unnest(CASE payload->>'type'
        WHEN 'payment' THEN ARRAY[ledger.account_id(payload->'user_id')]
        WHEN 'transfer' THEN ARRAY[ledger.account_id(payload->'transfer_from'), ledger.account_id(payload->'transfer_to')]
    END) account WHERE account IS NOT NULL
$$;

-- SECURITY DEFINER: the job's role may change balances only through these rules (db/grants.sql grants
-- it EXECUTE, nothing on the tables); the fixed search_path keeps a caller's objects out of it.
CREATE OR REPLACE FUNCTION ledger.apply_payment(message_id text, payload jsonb) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    kind text := payload->>'type';
    amount_text text := payload->'amount' #>> '{}';
    money numeric(18, 2);
    money_currency text := payload->>'currency';
    fee_text text := payload->'fee' #>> '{}';
    fee numeric(18, 2) := 0;
    debited bigint;
    credited bigint;
    source ledger.accounts;
    target ledger.accounts;
BEGIN
    IF kind = 'order' THEN
        RETURN jsonb_build_object('status', 'applied', 'change', 'none');
    END IF;
    IF kind IS DISTINCT FROM 'payment' AND kind IS DISTINCT FROM 'transfer' THEN
        RETURN jsonb_build_object('status', 'rejected', 'reason', 'unknown type', 'type', kind);
    END IF;
    -- exact money: digits with an optional fraction (at most 16 before the point: numeric(18, 2)), no
    -- sign, no exponent, and more than two decimals is rejected, never rounded (10.005 is not 10.01)
    IF amount_text IS NULL OR jsonb_typeof(payload->'amount') NOT IN ('number', 'string')
            OR amount_text !~ '^[0-9]{1,16}(\.[0-9]+)?$' THEN
        RETURN jsonb_build_object('status', 'rejected', 'reason', 'invalid amount');
    END IF;
    IF amount_text::numeric <> round(amount_text::numeric, 2) THEN
        RETURN jsonb_build_object('status', 'rejected', 'reason', 'amount has more than two decimals',
            'amount', amount_text);
    END IF;
    money := amount_text::numeric;
    IF money = 0 THEN
        RETURN jsonb_build_object('status', 'rejected', 'reason', 'invalid amount');
    END IF;
    -- a fee, by the amount's rules (zero allowed: no fee line then)
    IF payload ? 'fee' THEN
        IF fee_text IS NULL OR jsonb_typeof(payload->'fee') NOT IN ('number', 'string')
                OR fee_text !~ '^[0-9]{1,16}(\.[0-9]+)?$' THEN
            RETURN jsonb_build_object('status', 'rejected', 'reason', 'invalid fee');
        END IF;
        IF fee_text::numeric <> round(fee_text::numeric, 2) THEN
            RETURN jsonb_build_object('status', 'rejected', 'reason', 'fee has more than two decimals', 'fee', fee_text);
        END IF;
        fee := fee_text::numeric;
    END IF;
    IF kind = 'payment' THEN
        debited := ledger.account_id(payload->'user_id');
    ELSE
        debited := ledger.account_id(payload->'transfer_from');
        credited := ledger.account_id(payload->'transfer_to');
        IF credited IS NULL THEN
            RETURN jsonb_build_object('status', 'rejected', 'reason', 'invalid account');
        END IF;
        IF credited = debited THEN
            RETURN jsonb_build_object('status', 'rejected', 'reason', 'same account', 'account', debited);
        END IF;
    END IF;
    IF debited IS NULL THEN
        RETURN jsonb_build_object('status', 'rejected', 'reason', 'invalid account');
    END IF;
    -- both rows locked in id order, so two transfers in opposite directions cannot deadlock even
    -- without postgres.effect.keys
    PERFORM FROM ledger.accounts a WHERE a.id IN (debited, credited) ORDER BY a.id FOR UPDATE;
    SELECT * INTO source FROM ledger.accounts a WHERE a.id = debited;
    IF source.id IS NULL THEN
        RETURN jsonb_build_object('status', 'rejected', 'reason', 'unknown account', 'account', debited,
            'amount', money);
    END IF;
    IF credited IS NOT NULL THEN
        SELECT * INTO target FROM ledger.accounts a WHERE a.id = credited;
        IF target.id IS NULL THEN
            RETURN jsonb_build_object('status', 'rejected', 'reason', 'unknown account', 'account', credited,
                'amount', money);
        END IF;
    END IF;
    IF money_currency IS DISTINCT FROM source.currency OR money_currency IS DISTINCT FROM coalesce(target.currency, source.currency) THEN
        RETURN jsonb_build_object('status', 'rejected', 'reason', 'currency not kept by the account',
            'currency', money_currency, 'amount', money);
    END IF;
    IF source.balance < money + fee THEN
        RETURN jsonb_build_object('status', 'rejected', 'reason', 'insufficient funds', 'account', debited,
            'amount', money, 'fee', fee);
    END IF;
    UPDATE ledger.accounts a SET balance = a.balance - (money + fee) WHERE a.id = debited;
    IF credited IS NOT NULL THEN
        UPDATE ledger.accounts a SET balance = a.balance + money WHERE a.id = credited;
    END IF;
    INSERT INTO ledger.journal (message_id, account, leg, amount, currency)
        VALUES (apply_payment.message_id, debited, 'debit', -(money + fee), money_currency),
               (apply_payment.message_id, coalesce(credited, 0), 'credit', money, money_currency);
    IF fee > 0 THEN
        INSERT INTO ledger.journal (message_id, account, leg, amount, currency)
            VALUES (apply_payment.message_id, ledger.fee_account(), 'credit', fee, money_currency);
    END IF;
    IF kind = 'payment' THEN
        RETURN jsonb_build_object('status', 'applied', 'account', debited, 'amount', money, 'fee', fee,
            'balance', source.balance - money - fee);
    END IF;
    RETURN jsonb_build_object('status', 'applied', 'transfer_from', debited, 'transfer_to', credited,
        'amount', money, 'fee', fee, 'balance_from', source.balance - money - fee, 'balance_to', target.balance + money);
END
$$;

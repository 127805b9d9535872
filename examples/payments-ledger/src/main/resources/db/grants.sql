-- What the job's role (ledger_job, postgres.user in job.properties) needs, and nothing more. Run it as
-- the role that owns the ledger (ran db/ledger.sql) and onceflow's tables (ran the statements that
-- `--print-postgres-ddl` prints, with the job's settings), after both. PaymentsLedgerClusterIT runs the
-- job as this role with exactly these statements.
--
--   CREATE ROLE ledger_job LOGIN PASSWORD '...';   -- once, by an administrator

-- onceflow's tables (the names job.properties gives them, in schema public), as onceflow's
-- docs/deploy.md lists them: upserted (INSERT ... ON CONFLICT DO UPDATE) and locked (SELECT ... FOR UPDATE) ...
GRANT USAGE ON SCHEMA public TO ledger_job;
GRANT SELECT, INSERT, UPDATE ON payments_ledger_events, payments_ledger_rejects, payments_ledger_writers TO ledger_job;
-- ... or appended to and read
GRANT SELECT, INSERT ON payments_ledger_commit_log, payments_ledger_runs TO ledger_job;
-- ... the effects' queue: filled with the inbox rows, emptied as the effects are applied (a failed
-- effect stays, marked, until an operator re-drives or skips it) ...
GRANT SELECT, INSERT, UPDATE, DELETE ON payments_ledger_events_effect_queue TO ledger_job;
-- ... and what operators did to effects (bin/onceflow effects, run with the job's settings)
GRANT SELECT, INSERT ON payments_ledger_events_effect_log TO ledger_job;
-- ... and the outbox of outcomes for postgres.effect.results.topic, marked and trimmed as they are published
GRANT SELECT, INSERT, UPDATE, DELETE ON payments_ledger_events_outcomes TO ledger_job;

-- The ledger: the job only calls the effect function and the key function. apply_payment is SECURITY
-- DEFINER, so it changes balances and the journal with its owner's rights, by its rules only; the job's
-- role has no privilege on ledger.accounts or ledger.journal and cannot write a balance itself.
-- Functions are executable by PUBLIC unless revoked: revoke that first, so only the job calls them.
REVOKE ALL ON FUNCTION ledger.apply_payment(text, jsonb), ledger.payment_accounts(text, jsonb) FROM PUBLIC;
GRANT USAGE ON SCHEMA ledger TO ledger_job;
GRANT EXECUTE ON FUNCTION ledger.apply_payment(text, jsonb), ledger.payment_accounts(text, jsonb) TO ledger_job;

-- One path for every partner account whose tokens leave it: removal through
-- DELETE /api/partner-accounts/:id (state becomes 'revoked', tokens cleared)
-- as well as a cascaded delete (0025). The trigger hands the old tokens to
-- the revocation job; the route no longer does it by hand.
create or replace function partner_accounts_revoke_on_delete() returns trigger
language plpgsql as $$
begin
  insert into partner_token_revocations (account_id, tenant_id, access_token_sealed, refresh_token_sealed)
  values (old.id, old.tenant_id, old.access_token_sealed, old.refresh_token_sealed)
  on conflict (account_id) do nothing;
  perform graphile_worker.add_job('partner.token-revocation', json_build_object('accountId', old.id::text),
    job_key => 'partner-revocation:' || old.id::text, max_attempts => 8);
  return case when tg_op = 'DELETE' then old else new end;
end;
$$;

create trigger partner_accounts_revoke_on_removal
  after update of state on partner_accounts
  for each row
  when (new.state = 'revoked' and old.state <> 'revoked'
        and (old.access_token_sealed is not null or old.refresh_token_sealed is not null))
  execute function partner_accounts_revoke_on_delete();

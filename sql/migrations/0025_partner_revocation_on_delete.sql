-- A partner account that disappears with its person or tenant (DELETE
-- /api/auth/account, an altidp account-delete, a deleted tenant) still holds
-- live tokens at the provider: hand them to the revocation job exactly as
-- DELETE /api/partner-accounts/:id does. That route clears the tokens before
-- the row goes, so this fires only for cascaded deletes.
create function partner_accounts_revoke_on_delete() returns trigger
language plpgsql as $$
begin
  insert into partner_token_revocations (account_id, tenant_id, access_token_sealed, refresh_token_sealed)
  values (old.id, old.tenant_id, old.access_token_sealed, old.refresh_token_sealed)
  on conflict (account_id) do nothing;
  perform graphile_worker.add_job('partner.token-revocation', json_build_object('accountId', old.id::text),
    job_key => 'partner-revocation:' || old.id::text, max_attempts => 8);
  return old;
end;
$$;

create trigger partner_accounts_revoke_on_delete
  before delete on partner_accounts
  for each row
  when (old.access_token_sealed is not null or old.refresh_token_sealed is not null)
  execute function partner_accounts_revoke_on_delete();

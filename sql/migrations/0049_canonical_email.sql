-- One canonical e-mail address everywhere. canonical_email() is the SQL twin
-- of canonicalEmail() in core/accounts/email.ts (a test checks that they
-- agree on every code point): the fullwidth forms of ASCII and the Kelvin
-- sign become ASCII, white space at the edges is trimmed, then only
-- printable ASCII is accepted, A-Z lowercased by a fixed table (never the
-- locale's lower(), which maps İ to i while JavaScript maps it to i̇), with a
-- plain domain (no trailing dot). Anything else is refused: null.
create function canonical_email(address text) returns text
  language sql immutable strict parallel safe
  return (
    select case
      when length(t) <= 320 and t ~ '^[!-~]+$'
        and t ~ '^[^@]{1,64}@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*$'
        and length(t) - position('@' in t) <= 253
      then translate(t, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz')
    end
    from (
      select btrim(
        translate(address,
          -- U+FF01-U+FF5E, then the Kelvin sign
          '！＂＃＄％＆＇（）＊＋，－．／０１２３４５６７８９：；＜＝＞？＠ＡＢＣＤＥＦＧＨＩＪＫＬＭＮＯＰＱＲＳＴＵＶＷＸＹＺ［＼］＾＿｀ａｂｃｄｅｆｇｈｉｊｋｌｍｎｏｐｑｒｓｔｕｖｗｘｙｚ｛｜｝～' || chr(8490),
          '!"#$%&''()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\]^_`abcdefghijklmnopqrstuvwxyz{|}~K'),
        E' \t\n\r\f' || chr(11) || chr(160) || chr(12288)) as t
      where length(address) <= 1000
    ) mapped);

-- An account is found by its canonical address (email keeps what was typed,
-- for display). Two existing accounts that lower() told apart but that are
-- one canonical address: the one whose address was plain ASCII keeps it
-- (else the oldest); the other keeps its row and its other ways in, and has
-- no key: it cannot sign in by password until an operator gives it another
-- address (docs/operations.md). So does an address that is refused.
alter table users add column email_key text;
update users u set email_key = ranked.key
from (
  select id, canonical_email(email) as key,
    row_number() over (partition by canonical_email(email) order by (email ~ '^[!-~]+$') desc, created_at, id) as place
  from users
) ranked
where ranked.id = u.id and ranked.key is not null and ranked.place = 1;
create unique index users_canonical_email_key on users (email_key);
alter table users add constraint users_email_key_canonical check (email_key is null or email_key = canonical_email(email));

create function users_set_email_key() returns trigger language plpgsql as $$
begin
  new.email_key := canonical_email(new.email);
  return new;
end $$;
create trigger users_email_key before insert or update of email on users
  for each row execute function users_set_email_key();

-- One open invitation per canonical address and workspace: of two open ones
-- for the same address, the newer replaces the older, as a new invitation does.
with replaced as (
  update tenant_invitations i set revoked_at = now()
  where i.accepted_at is null and i.revoked_at is null and exists (
    select 1 from tenant_invitations n
    where n.tenant_id = i.tenant_id and canonical_email(n.email) = canonical_email(i.email)
      and n.accepted_at is null and n.revoked_at is null and (n.created_at, n.id) > (i.created_at, i.id))
  returning i.id
)
update invitation_emails e set status = 'cancelled', sealed_link = null
from replaced where e.invitation_id = replaced.id and e.status = 'queued';
create unique index tenant_invitations_open_canonical_email on tenant_invitations (tenant_id, canonical_email(email))
  where accepted_at is null and revoked_at is null;

-- A dashboard second-factor login finds its licenses by the purchaser's canonical address.
create index dashboard_licenses_canonical_email on dashboard_licenses (canonical_email(purchaser_email));

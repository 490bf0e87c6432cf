-- The indexes on lower(email) that 0049's canonical keys replace. Left in,
-- they still told apart or joined addresses by the locale's lower() (İ is i
-- there): an account kept from before 0049 without a key (its address is
-- refused, say kr\u0130s@) blocked the owner of kris@ with a unique violation
-- on every sign-up, external login and invitation for that address.
drop index users_email_key;
drop index tenant_invitations_open_email;
drop index dashboard_licenses_email_idx;

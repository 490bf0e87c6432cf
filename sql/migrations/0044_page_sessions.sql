-- Signed-in sessions of the server-rendered pages (the console, the claim
-- page, the board approval page). The cookie stays signed; a signed-in one is
-- honoured only while its row here is live, so signing out, changing the
-- password or deleting the account ends it on the server at once, on every
-- api replica. Anonymous sessions (a sign-in form's CSRF token) have no row:
-- a visitor who has not signed in writes nothing.
create table page_sessions (
  sid_hash bytea primary key,
  purpose text not null,
  user_id uuid not null references users (id) on delete cascade,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  ended_at timestamptz
);
create index page_sessions_live_by_user on page_sessions (user_id) where ended_at is null;
create index page_sessions_expires_at on page_sessions (expires_at);

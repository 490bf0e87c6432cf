-- Board positions per tenant. The Agent API pages boards by an integer
-- position (cursor 0..1,000,000); one identity sequence for the whole
-- platform broke paging after a million boards platform-wide and let a
-- tenant read the platform's board count off its own positions. Each tenant
-- now numbers its boards 1, 2, 3... from a counter row of its own.

alter table insight_boards drop constraint insight_boards_position_key;
alter table insight_boards alter column position drop identity if exists;

with numbered as (
  select id, row_number() over (partition by tenant_id order by position) as n from insight_boards
)
update insight_boards b set position = numbered.n from numbered where numbered.id = b.id;

drop index insight_boards_tenant_position_idx;
alter table insight_boards add constraint insight_boards_tenant_position_key unique (tenant_id, position);

create table tenant_board_positions (
  tenant_id uuid primary key references tenants (id) on delete cascade,
  last_position bigint not null check (last_position >= 1)
);
insert into tenant_board_positions (tenant_id, last_position)
select tenant_id, max(position) from insight_boards group by tenant_id;

-- The counter row is locked until the inserting transaction ends, so boards
-- of one tenant get gapless, increasing positions even when created at once.
create function insight_boards_assign_position() returns trigger language plpgsql as $$
begin
  insert into tenant_board_positions as c (tenant_id, last_position) values (new.tenant_id, 1)
  on conflict (tenant_id) do update set last_position = c.last_position + 1
  returning last_position into new.position;
  return new;
end;
$$;
create trigger insight_boards_position before insert on insight_boards
  for each row execute function insight_boards_assign_position();

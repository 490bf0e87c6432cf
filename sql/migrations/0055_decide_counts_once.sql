-- platform_decide read an account's unfinished jobs three times per call
-- (both pools for the quota, then the job's pool again for its fair tag),
-- and each read sums the account's count changes not folded yet: with one
-- busy account that is every change of the last second, read thrice per
-- enqueue. Now each pool's count is read once and both uses take it from
-- there.
create or replace function platform_decide(p_jobs platform_job[])
returns setof platform_decision
language plpgsql
stable
set plan_cache_mode = force_generic_plan
as $$
begin
  return query
  with input as (
    select x.i, x.pool, x.fair, coalesce(x.quota, false) as quota, t.account_id
    from unnest(p_jobs) x
    left join lateral (select t.account_id from tenants t where t.id = x.tenant_id limit 1) t on true
  ), pool_counts as (
    select a.account_id, p.pool, account_pool_count(a.account_id, p.pool) as open
    from (select distinct x.account_id from input x where x.account_id is not null) a
    cross join (values ('short'), ('io')) as p(pool)
  ), accounts as (
    select a.account_id, l.plan, l.max_open_jobs, l.fair_weight, greatest(0, a.open) as open
    from (select c.account_id, sum(c.open)::int as open from pool_counts c group by 1) a
    cross join lateral account_limits(a.account_id) l
  ), positions as (
    select p.pool, fair_position(p.pool) as position from (select distinct x.pool from input x) p
  ), decided as (
    select x.i, x.pool, x.fair, x.account_id, a.plan, a.max_open_jobs, a.fair_weight, a.open,
      coalesce(x.quota and a.open + count(*) over (partition by x.account_id order by x.i
        rows between unbounded preceding and 1 preceding) >= a.max_open_jobs, false) as refused
    from input x left join accounts a on a.account_id = x.account_id
  )
  select d.i,
    case when d.fair and not d.refused then least(now(), p.position + (c.open
      + count(*) filter (where d.fair and not d.refused) over (partition by d.account_id, d.pool order by d.i
          rows between unbounded preceding and 1 preceding))
      * (16.0 / coalesce(d.fair_weight, 1)) * interval '1 microsecond') end,
    d.refused, d.plan, d.max_open_jobs, d.open
  from decided d left join pool_counts c on c.account_id = d.account_id and c.pool = d.pool
    left join positions p on p.pool = d.pool
  order by d.i;
end;
$$;

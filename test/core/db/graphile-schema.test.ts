// The platform once put indexes and triggers of its own on Graphile Worker's
// tables and changed a setting of graphile_worker.add_jobs; 0043 took all that
// out. Graphile's schema must stay exactly what its own migrations make, so a
// Graphile upgrade never runs into (or silently drops) something of ours.
import pg from 'pg';
import t from 'tap';
import { runMigrations } from 'graphile-worker';
import { graphileLogger } from '../../../core/graphile-logger.ts';
import { createTestDatabase } from '../../helpers/db.ts';
import { testLogger } from '../../helpers/config.ts';

const ns = `(select oid from pg_namespace where nspname = 'graphile_worker')`;

// One query per category; names, never OIDs, so two databases compare.
const categories: Record<string, string> = {
  relations: `select c.relname, c.relkind, c.relpersistence, c.reloptions, c.relrowsecurity, c.relforcerowsecurity,
      c.relacl::text[] as acl, obj_description(c.oid, 'pg_class') as comment
    from pg_class c where c.relnamespace = ${ns} order by 1`,
  columns: `select c.relname, a.attname, format_type(a.atttypid, a.atttypmod) as type, a.attnotnull,
      pg_get_expr(d.adbin, d.adrelid) as default, a.attidentity, a.attgenerated, co.collname
    from pg_attribute a join pg_class c on c.oid = a.attrelid
    left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
    left join pg_collation co on co.oid = a.attcollation and co.collname <> 'default'
    where c.relnamespace = ${ns} and c.relkind in ('r', 'p', 'v', 'm', 'c', 'f') and a.attnum > 0 and not a.attisdropped
    order by c.relname, a.attnum`,
  indexes: `select ic.relname as index, tc.relname as table, pg_get_indexdef(i.indexrelid) as def, i.indisvalid
    from pg_index i join pg_class ic on ic.oid = i.indexrelid join pg_class tc on tc.oid = i.indrelid
    where ic.relnamespace = ${ns} or tc.relnamespace = ${ns} order by 1`,
  // Any constraint in the schema, on its tables, or pointing at them (a foreign key from ours).
  constraints: `select n.nspname, coalesce(r.relname, ty.typname) as owner, c.conname, c.contype,
      pg_get_constraintdef(c.oid) as def, c.condeferrable, c.condeferred, c.convalidated
    from pg_constraint c join pg_namespace n on n.oid = c.connamespace
    left join pg_class r on r.oid = c.conrelid left join pg_type ty on ty.oid = c.contypid
    left join pg_class f on f.oid = c.confrelid
    where c.connamespace = ${ns} or r.relnamespace = ${ns} or f.relnamespace = ${ns} order by 1, 2, 3`,
  triggers: `select c.relname, tg.tgname, pg_get_triggerdef(tg.oid) as def, tg.tgenabled
    from pg_trigger tg join pg_class c on c.oid = tg.tgrelid
    where c.relnamespace = ${ns} and not tg.tgisinternal order by 1, 2`,
  views: `select c.relname, pg_get_viewdef(c.oid) as def
    from pg_class c where c.relnamespace = ${ns} and c.relkind in ('v', 'm') order by 1`,
  functions: `select p.proname, pg_get_function_identity_arguments(p.oid) as args, pg_get_function_result(p.oid) as result,
      p.prokind, l.lanname, p.prosrc, p.proconfig, p.provolatile, p.prosecdef, p.proisstrict, p.proparallel,
      p.proleakproof, p.procost, p.prorows, p.proacl::text[] as acl, obj_description(p.oid, 'pg_proc') as comment
    from pg_proc p join pg_language l on l.oid = p.prolang where p.pronamespace = ${ns} order by 1, 2`,
  types: `select t.typname, t.typtype, format_type(t.typbasetype, t.typtypmod) as base, t.typnotnull,
      array(select e.enumlabel from pg_enum e where e.enumtypid = t.oid order by e.enumsortorder)::text[] as labels
    from pg_type t left join pg_class c on c.oid = t.typrelid
    where t.typnamespace = ${ns} and t.typtype in ('c', 'd', 'e', 'r', 'm') and (t.typtype <> 'c' or c.relkind = 'c')
    order by 1`,
  'rules and policies': `select 'rule' as kind, r.rulename as name, c.relname, pg_get_ruledef(r.oid) as def
      from pg_rewrite r join pg_class c on c.oid = r.ev_class where c.relnamespace = ${ns} and r.rulename <> '_RETURN'
    union all
    select 'policy', p.polname, c.relname, pg_get_expr(p.polqual, p.polrelid)
      from pg_policy p join pg_class c on c.oid = p.polrelid where c.relnamespace = ${ns}
    order by 1, 2`,
  'graphile migrations': `select id, breaking from graphile_worker.migrations order by id`,
};

async function withClient<T>(url: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

async function fingerprint(url: string): Promise<Record<string, unknown[]>> {
  return withClient(url, async (c) => {
    const database = (await c.query<{ db: string }>('select current_database() as db')).rows[0]!.db;
    const result: Record<string, unknown[]> = {};
    for (const [name, query] of Object.entries(categories)) {
      const { rows } = await c.query(query);
      // The only thing that may legitimately differ is the database's own name.
      result[name] = JSON.parse(JSON.stringify(rows).replaceAll(database, '<database>'));
    }
    return result;
  });
}

t.test(
  "after the platform's migrations, graphile_worker is exactly what Graphile Worker's own migrations make",
  async (t) => {
    const platform = await createTestDatabase(t);
    const graphileOnly = await createTestDatabase(t, { empty: true });
    await runMigrations({ connectionString: graphileOnly, logger: graphileLogger(testLogger()), maxPoolSize: 1 });
    const [a, b] = await Promise.all([fingerprint(platform), fingerprint(graphileOnly)]);
    t.ok(
      b.functions!.some((f) => (f as { proname: string }).proname === 'add_jobs'),
      'the fingerprint sees Graphile Worker',
    );
    for (const name of Object.keys(categories)) {
      t.same(a[name], b[name], `the platform adds nothing to Graphile Worker's schema: ${name}`);
    }

    await withClient(platform, async (c) => {
      const reaching = await c.query(`select n.nspname, p.proname, pg_get_function_identity_arguments(p.oid) as args
      from pg_proc p join pg_namespace n on n.oid = p.pronamespace
      where n.nspname not in ('graphile_worker', 'pg_catalog', 'information_schema')
        and p.prosrc ~* 'graphile_worker"?\\s*\\.\\s*"?_private_' order by 1, 2, 3`);
      t.same(reaching.rows, [], "no platform function reaches into Graphile Worker's private tables");
      const triggers = await c.query(`select c.relname, tg.tgname, p.proname
      from pg_trigger tg join pg_class c on c.oid = tg.tgrelid join pg_proc p on p.oid = tg.tgfoid
      where c.relnamespace = ${ns} and not tg.tgisinternal and p.pronamespace <> ${ns} order by 1, 2`);
      t.same(
        triggers.rows,
        [],
        "the platform adds nothing to Graphile Worker's schema: no trigger of ours on its tables",
      );
    });
  },
);

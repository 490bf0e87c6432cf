// Why each table that the hourly sweep (expired-rows.ts) does not touch still
// stays bounded. Every table of the schema is either swept there or listed
// here with its reason; a test fails on a new table that is neither, so
// growth is decided when the table is made, not found in production.

export type KeptReason =
  /** People's own data: removed with what owns it (a session, a company, a tenant), or by its own retention. */
  | 'owned'
  /** At most a fixed number of rows per tenant, user, account, plan or process. */
  | 'bounded'
  /** Removed with the job it belongs to (foreign key on delete cascade), so JOB_RETENTION_DAYS bounds it. */
  | 'with_its_job'
  /** Emptied by the task that consumes it. */
  | 'drained';

export const KEPT_TABLES: Record<string, KeptReason> = {
  // Accounts, people, workspaces
  tenants: 'owned',
  users: 'owned',
  user_identities: 'owned',
  tenant_memberships: 'owned',
  tenant_member_audit: 'owned',
  invitation_emails: 'owned',
  dashboard_licenses: 'owned',
  dashboard_recovery_codes: 'bounded',
  tenant_secrets: 'bounded',
  tenant_agent_settings: 'bounded',
  tenant_board_positions: 'bounded',
  tenant_message_counts: 'bounded',
  // Chat and memory (memory files have the tenant's own retention: memory.retention)
  chat_sessions: 'owned',
  chat_messages: 'owned',
  memory_files: 'owned',
  memory_settings: 'bounded',
  // Agents and their identity
  agents: 'owned',
  agent_registrations: 'owned',
  agent_principals: 'owned',
  idp_signing_keys: 'bounded',
  managed_agents: 'owned',
  runners: 'owned',
  runner_work: 'with_its_job',
  // Companies and boards
  companies: 'owned',
  company_agents: 'owned',
  company_tasks: 'owned',
  company_runs: 'owned',
  insight_boards: 'owned',
  board_versions: 'owned',
  board_links: 'owned',
  board_publications: 'owned',
  board_publish_approvals: 'owned',
  // Skills, keys, channels, partners
  skills: 'owned',
  skill_configs: 'owned',
  legacy_skill_registrations: 'owned',
  provider_keys: 'bounded',
  platform_provider_keys: 'bounded',
  channel_links: 'bounded',
  partner_accounts: 'owned',
  partner_account_services: 'owned',
  partner_token_revocations: 'drained',
  // Billing and usage (usage_daily is the kept record: a row per tenant, day, model and agent)
  billing_customers: 'bounded',
  billing_entitlements: 'bounded',
  billing_addon_purchases: 'owned',
  billing_sandbox_objects: 'owned',
  tenant_budgets: 'bounded',
  tenant_credits: 'bounded',
  usage_daily: 'owned',
  usage_ingest_months: 'bounded',
  usage_rollup_queue: 'drained',
  tool_uses: 'bounded',
  // The job engine
  session_job_events: 'with_its_job',
  job_history: 'with_its_job',
  fair_clock: 'bounded',
  scheduled_job_last_runs: 'bounded',
  account_job_counts: 'bounded',
  account_job_count_changes: 'drained',
  plan_limits: 'bounded',
};

// The bounds of invitations, and where invitation e-mails go out, as the
// teams code reads them from config.teams. The variables behind them
// (INVITATION_TTL_HOURS, SMTP_URL, ...) are declared in
// core/config/groups/teams.ts. Without SMTP_URL nothing is mailed: the Admin
// passes the link on.

export type TeamSettings = {
  invitationTtlHours: number;
  invitationsPerDay: number;
  pendingInvitations: number;
  /** smtp:// or smtps:// URL (credentials in it); null: invitation e-mails are not sent. */
  smtpUrl: string | null;
  mailFrom: string;
};

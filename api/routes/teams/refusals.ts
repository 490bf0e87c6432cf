// The team rules' refusals as answers, for the JSON routes and the accept
// page alike: a rule is 409 naming it, a missing member 404, someone other
// than the owner handing the workspace over 403, an invitation
// refusal its own status and code (a daily limit with Retry-After).
import { InvitationError } from '../../../core/teams/invitations.ts';
import { MembershipRuleError, NotAMemberError, NotTheOwnerError } from '../../../core/teams/members.ts';
import { PlatformHttpError } from '../../errors.ts';

export function teamRefusal(error: unknown): unknown {
  if (error instanceof MembershipRuleError) return new PlatformHttpError(409, error.code, error.message);
  if (error instanceof NotAMemberError) return new PlatformHttpError(404, 'not_found', error.message);
  if (error instanceof NotTheOwnerError) return new PlatformHttpError(403, 'owner_required', error.message);
  if (error instanceof InvitationError) {
    return new PlatformHttpError(
      error.status,
      error.code,
      error.message,
      error.status === 429 ? { 'retry-after': '3600' } : {},
    );
  }
  return error;
}

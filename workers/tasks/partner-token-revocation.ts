// partner.token-revocation: revokes a removed partner account's tokens at the
// provider (see core/partner-accounts/revocation.ts). Added by DELETE
// /api/partner-accounts/:accountId as a job of the platform (enqueueSystemJob, job key per
// account, 8 attempts with Graphile's backoff); no platform job: the
// partner_token_revocations row is the state, and running twice is a no-op.
import { z } from 'zod';
import { Keyring } from '../../core/crypto/keyring.ts';
import { PARTNER_REVOCATION_JOB } from '../../core/partner-accounts/accounts.ts';
import { revokeRemovedTokens } from '../../core/partner-accounts/revocation.ts';
import type { TaskDefinition } from '../define-task.ts';

const Payload = z.object({ accountId: z.uuid() });

const partnerTokenRevocation: TaskDefinition = {
  kind: PARTNER_REVOCATION_JOB,
  build: (deps) => {
    const keyring = Keyring.fromConfig(deps.config);
    return async (payload, helpers) => {
      const parsed = Payload.safeParse(payload);
      if (!parsed.success) {
        deps.logger.error({ kind: PARTNER_REVOCATION_JOB }, 'partner revocation job without an account id; dropped');
        return;
      }
      const { accountId } = parsed.data;
      const attempt = helpers.job.attempts;
      try {
        const outcome = await revokeRemovedTokens(deps.db, deps.config, keyring, accountId);
        deps.logger.info({ kind: PARTNER_REVOCATION_JOB, accountId, outcome }, 'partner tokens revoked');
      } catch (error) {
        const final = attempt >= helpers.job.max_attempts;
        // The message names the provider's answer only, never a token.
        deps.logger[final ? 'error' : 'warn'](
          { kind: PARTNER_REVOCATION_JOB, accountId, attempt, reason: (error as Error).message },
          final
            ? 'partner token revocation gave up; the sealed tokens stay in partner_token_revocations'
            : 'partner token revocation failed; it will be retried',
        );
        throw error;
      }
    };
  },
};

export default partnerTokenRevocation;

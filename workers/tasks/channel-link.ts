// channel.link: the two steps of linking a channel (core/channels/link-job.ts).
// Not built with defineTask: the platform job outlives a Graphile job (it
// waits for the binding between two of them), so its steps fence by the
// attempt count they raise themselves.
import { TaskEnvelope } from '../../core/jobs/enqueue.ts';
import { Keyring } from '../../core/crypto/keyring.ts';
import { LINK_JOB } from '../../core/channels/linking.ts';
import { LinkJobInput, runLinkStep } from '../../core/channels/link-job.ts';
import type { TaskDefinition } from '../define-task.ts';

const channelLink: TaskDefinition = {
  kind: LINK_JOB,
  build: (deps) => async (payload, helpers) => {
    const envelope = TaskEnvelope.safeParse(payload);
    const input = envelope.success ? LinkJobInput.safeParse(envelope.data.input) : null;
    if (!envelope.success || !input?.success) {
      deps.logger.error({ kind: LINK_JOB, graphileJobId: helpers.job.id }, 'refused a channel.link job without a valid envelope; dropping it');
      return;
    }
    const { jobId, tenantId } = envelope.data;
    const logger = deps.logger.child({ kind: LINK_JOB, jobId, phase: input.data.phase });
    await runLinkStep(input.data.phase, {
      db: deps.db, config: deps.config, keyring: Keyring.fromConfig(deps.config), jobId, tenantId,
      final: helpers.job.attempts >= helpers.job.max_attempts,
    });
    logger.info('channel link step done');
  },
};

export default channelLink;

// chat.turn: answers one user message (core/chat/turn.ts). Jobs of one
// session share a Graphile queue, so turns run in order.
import { enqueueChannelFailure } from '../../core/channels/deliver.ts';
import { TurnInput, runChatTurn } from '../../core/chat/turn.ts';
import { Keyring } from '../../core/crypto/keyring.ts';
import { PermanentJobError, unstorableDataError } from '../../core/jobs/errors.ts';
import { defineTask, JobNotRecordedError } from '../define-task.ts';

export default defineTask('chat.turn', TurnInput, async (input, ctx) => {
  try {
    return await runChatTurn(input, { ...ctx, keyring: Keyring.fromConfig(ctx.config) });
  } catch (error) {
    // A turn that fails for good (not cancelled, not finished elsewhere): a
    // message that came from a messaging channel gets a short apology there,
    // once per turn (keyed by the job), instead of no answer at all.
    const final =
      error instanceof PermanentJobError || unstorableDataError(error) !== null || ctx.attempt >= ctx.maxAttempts;
    if (final && !ctx.signal.aborted && !(error instanceof JobNotRecordedError)) {
      await enqueueChannelFailure(ctx.db, {
        tenantId: ctx.tenantId,
        turnJobId: ctx.jobId,
        userMessageId: input.userMessageId,
      }).catch((e: unknown) => ctx.logger.warn({ err: e }, 'could not queue the channel apology of a failed turn'));
    }
    throw error;
  }
});

// channel.disconnect: undoes the registration at the channel after the
// credentials and binding were deleted (core/channels/disconnect.ts).
import { DisconnectInput, openTeardown } from '../../core/channels/disconnect.ts';
import { DISCONNECT_JOB } from '../../core/channels/linking.ts';
import { adapterFor, fetchForChannel } from '../../core/channels/registry.ts';
import { ChannelSendError } from '../../core/channels/types.ts';
import { Keyring } from '../../core/crypto/keyring.ts';
import { RetryableJobError } from '../../core/jobs/errors.ts';
import { defineTask } from '../define-task.ts';

export default defineTask(DISCONNECT_JOB, DisconnectInput, async (input, ctx) => {
  const adapter = adapterFor(input.channel);
  const settings = openTeardown(Keyring.fromConfig(ctx.config), ctx.jobId, input);
  if (!adapter || !settings) return { unregistered: false, reason: 'nothing was registered' };
  try {
    await adapter.unregister({ config: ctx.config, settings, fetch: fetchForChannel(adapter, ctx.config) });
    return { unregistered: true };
  } catch (error) {
    if (error instanceof ChannelSendError && error.kind === 'retry')
      throw new RetryableJobError('channel_unavailable', error.message);
    if (error instanceof ChannelSendError) return { unregistered: false, reason: error.message };
    throw error;
  }
});

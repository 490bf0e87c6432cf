// channel.link: registers a channel's inbound endpoint, then waits for the
// binding (core/channels/link-job.ts).
import { Keyring } from '../../core/crypto/keyring.ts';
import { LINK_JOB } from '../../core/channels/linking.ts';
import { LinkJobInput, runLinkJob } from '../../core/channels/link-job.ts';
import { defineTask } from '../define-task.ts';

export default defineTask(LINK_JOB, LinkJobInput, async (_input, ctx) =>
  runLinkJob({ ...ctx, keyring: Keyring.fromConfig(ctx.config) }),
);

// Every task the worker runs. A task's identifier is its platform job kind.
import type { TaskDefinition } from '../define-task.ts';
import agentRestore from './agent-restore.ts';
import altidpNotification from './altidp-notification.ts';
import billingExpire from './billing-expire.ts';
import consoleSample from './console-sample.ts';
import billingWebhook from './billing-webhook.ts';
import chatTurn from './chat-turn.ts';
import channelDeliver from './channel-deliver.ts';
import channelDisconnect from './channel-disconnect.ts';
import channelLink from './channel-link.ts';
import companyRun from './company-run.ts';
import diagNoop from './diag-noop.ts';
import diagSteps from './diag-steps.ts';
import diagWait from './diag-wait.ts';
import memoryRetention from './memory-retention.ts';
import partnerTokenRevocation from './partner-token-revocation.ts';
import deadWorkers from './maintenance-dead-workers.ts';
import sweepExpired from './maintenance-sweep-expired.ts';
import teamInvitationEmail from './team-invitation-email.ts';
import usageRollup from './usage-rollup.ts';

export const TASKS: readonly TaskDefinition[] = [
  chatTurn,
  companyRun,
  diagNoop,
  diagSteps,
  diagWait,
  sweepExpired,
  deadWorkers,
  usageRollup,
  agentRestore,
  billingWebhook,
  billingExpire,
  consoleSample,
  memoryRetention,
  channelLink,
  channelDeliver,
  channelDisconnect,
  altidpNotification,
  partnerTokenRevocation,
  teamInvitationEmail,
];

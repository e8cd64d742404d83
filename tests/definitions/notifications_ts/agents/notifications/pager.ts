import { defineNotification } from '@standardagents/spec';

export default defineNotification({
  description: 'Pages on-call when a thread fails',
  events: ['thread.failed', 'session.ended'],
  webhook: { url: 'https://pager.example.com/hooks/duet', secretEnv: 'PAGER_SECRET' },
} as const);

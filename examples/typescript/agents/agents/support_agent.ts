import { defineAgent } from '@standardagents/spec';
import { SESSION_DEFAULTS } from '../lib/support';

export default defineAgent({
  name: 'support_agent',
  ...SESSION_DEFAULTS,
  sideA: { prompt: 'support' },
  sideB: { human: true },
});

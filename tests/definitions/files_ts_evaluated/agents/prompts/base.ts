import { definePrompt } from '@standardagents/spec';
import { TONE, shared } from '../lib/shared';

const base = 'chat';
const extra = 'colour';
const flag = 'yes';

export default definePrompt({
  name: base,
  toolDescription: `Hi. ${TONE}`,
  model: 'm',
  prompt: `You help. ${TONE}`,
  tools: [...shared.tools],
  [extra]: 1,
  includeChat: flag,
  providerOptions: { temperature: Math.min(shared.temperature, 2) },
});

import { shared } from './shared';
const base = 'chat';
export default definePrompt({
  name: base,
  toolDescription: `Hi ${shared}`,
  model: 'm',
  prompt: 'p',
  tools: [...shared],
  [base]: 1,
  providerOptions: { temperature: Math.min(1, 2) },
});

import { definePrompt } from '@standardagents/spec';

export default definePrompt({
  name: 'assistant',
  toolDescription: 'Answers a question helpfully and briefly.',
  model: 'assistant_demo',
  includeChat: true,
  prompt: `You are a helpful assistant. Answer briefly and say so when you do not know.`,
  tools: ['house_rules', 'remind_me'],
});

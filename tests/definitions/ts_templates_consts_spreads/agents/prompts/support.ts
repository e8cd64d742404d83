import { definePrompt } from '@standardagents/spec';
import { COMPANY, TONE } from '../../shared/constants.js';
import { promptDefaults, signOff } from '../lib/defaults.js';

const TOOLS = ['lookup'] as const;

export default definePrompt({
  ...promptDefaults(),
  name: 'support',
  toolDescription: `Answers ${COMPANY}'s customers.`,
  prompt: `${TONE}\nYou help with orders.\n${signOff('Support')}`,
  tools: [...TOOLS],
});

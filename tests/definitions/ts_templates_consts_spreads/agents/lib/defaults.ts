import { TONE } from '../../shared/constants.js';

type Defaults = { model: string; includeChat: boolean | string };

/** What every prompt of the project starts from. */
export function promptDefaults(overrides: Partial<Defaults> = {}): Defaults {
  return { model: 'fast', includeChat: true, ...overrides };
}

export const signOff = (name: string): string => `${TONE}\nSign as ${name}.`;

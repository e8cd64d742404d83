// A helper the tools share; it refuses an unknown region.
const REGIONS: Record<string, string> = { eu: 'https://eu.example.com' };

export function endpoint(region: string): string {
  const url = REGIONS[region];
  if (!url) {
    throw new Error(`no endpoint for region \`${region}\``);
  }
  return url;
}

/**
 * One planted secret of each kind redaction must catch, each in the line it would stand in
 * (a shell command, an env file, JSON, a key file), and the ordinary values it must leave
 * alone. The secrets are made up (a seeded generator, so every run plants the same ones), of
 * the real shapes and lengths; `leaks` says whether any piece of one shows in a text.
 */

/** A seeded generator: the same run of characters for the same seed. */
function chars(seed: number, n: number, alphabet: string): string {
  let x = seed * 2654435761;
  let out = '';
  for (let i = 0; i < n; i++) {
    x = (x ^ (x << 13)) >>> 0;
    x = (x ^ (x >>> 17)) >>> 0;
    x = (x ^ (x << 5)) >>> 0;
    out += alphabet[x % alphabet.length];
  }
  return out;
}

const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const B64 = `${ALNUM}+/`;
const URLSAFE = `${ALNUM}_-`;
const HEX = '0123456789abcdef';
const UPPER_NUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

function keyBody(seed: number, lines: number): string {
  return Array.from({ length: lines }, (_, i) => chars(seed * 1000 + i, 64, B64)).join('\n');
}

export interface PlantedSecret {
  kind: string;
  /** The line (or block) as it would appear in a file or a command's output. */
  text: string;
  /** What must never show, in whole or in part. */
  secret: string;
}

function block(kind: string, label: string, seed: number, dashes = '-----'): PlantedSecret {
  const body = keyBody(seed, 6);
  const sp = dashes.length === 4 ? ' ' : '';
  return { kind, text: `${dashes}${sp}BEGIN ${label}${sp}${dashes}\n${body}\n${dashes}${sp}END ${label}${sp}${dashes}`, secret: body };
}

const jwt = `eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ1c2VyLTQyIiwiZXhwIjoxOTAwMDAwMDAwfQ.${chars(1, 43, URLSAFE)}`;
const awsId = `AKIA${chars(2, 16, UPPER_NUM)}`;
const awsSecret = `${chars(3, 18, B64)}Qz7${chars(4, 19, ALNUM)}`;
const pgpBody = `lQOYBF${chars(5, 58, B64)}\n${keyBody(6, 5)}\n=${chars(7, 4, B64)}`;
const puttyBody = keyBody(8, 4);

export const PLANTED: readonly PlantedSecret[] = [
  { kind: 'jwt', text: `curl -H "X-Session: ${jwt}" https://api.example.com/me`, secret: jwt },
  block('pem-rsa', 'RSA PRIVATE KEY', 10),
  block('pem-pkcs8', 'PRIVATE KEY', 20),
  block('pem-ec', 'EC PRIVATE KEY', 30),
  block('pem-encrypted', 'ENCRYPTED PRIVATE KEY', 40),
  block('openssh', 'OPENSSH PRIVATE KEY', 50),
  block('ssh2', 'SSH2 ENCRYPTED PRIVATE KEY', 60, '----'),
  {
    kind: 'pgp',
    text: `-----BEGIN PGP PRIVATE KEY BLOCK-----\nVersion: GnuPG v2\n\n${pgpBody}\n-----END PGP PRIVATE KEY BLOCK-----`,
    secret: pgpBody,
  },
  {
    kind: 'putty',
    text: `PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nPublic-Lines: 2\nAAAAC3NzaC1lZDI1NTE5\nAAAAIOkeyPublicPart\nPrivate-Lines: 4\n${puttyBody}\nPrivate-MAC: 0a1b`,
    secret: puttyBody,
  },
  { kind: 'openai', text: `export OPENAI_API_KEY=sk-proj-${chars(11, 48, URLSAFE)}`, secret: `sk-proj-${chars(11, 48, URLSAFE)}` },
  { kind: 'anthropic', text: `client = Anthropic(api_key="sk-ant-api03-${chars(12, 93, URLSAFE)}AA")`, secret: `sk-ant-api03-${chars(12, 93, URLSAFE)}AA` },
  { kind: 'github', text: `git clone https://ghp_${chars(13, 36, ALNUM)}@github.com/acme/app.git`, secret: `ghp_${chars(13, 36, ALNUM)}` },
  { kind: 'github-fine-grained', text: `GH token: github_pat_11${chars(14, 80, ALNUM)}`, secret: `github_pat_11${chars(14, 80, ALNUM)}` },
  {
    kind: 'gitlab',
    text: `curl --header "PRIVATE-TOKEN: glpat-${chars(15, 20, URLSAFE)}" https://gitlab.com/api/v4/projects`,
    secret: `glpat-${chars(15, 20, URLSAFE)}`,
  },
  {
    kind: 'slack',
    text: `SLACK_BOT=xoxb-${chars(16, 12, '0123456789')}-${chars(17, 13, '0123456789')}-${chars(18, 24, ALNUM)}`,
    secret: `xoxb-${chars(16, 12, '0123456789')}-${chars(17, 13, '0123456789')}-${chars(18, 24, ALNUM)}`,
  },
  {
    kind: 'slack-webhook',
    text: `post to https://hooks.slack.com/services/T${chars(19, 8, UPPER_NUM)}/B${chars(20, 8, UPPER_NUM)}/${chars(21, 24, ALNUM)}`,
    secret: `T${chars(19, 8, UPPER_NUM)}/B${chars(20, 8, UPPER_NUM)}/${chars(21, 24, ALNUM)}`,
  },
  { kind: 'stripe', text: `Stripe.api_key = 'sk_live_51${chars(22, 96, ALNUM)}'`, secret: `sk_live_51${chars(22, 96, ALNUM)}` },
  { kind: 'aws-access-key-id', text: `aws configure set aws_access_key_id ${awsId}`, secret: awsId },
  { kind: 'aws-secret-key', text: `User name,Access key ID,Secret access key\ndeploy,${awsId},${awsSecret}`, secret: awsSecret },
  { kind: 'aws-secret-assignment', text: `aws_secret_access_key = ${chars(23, 40, B64)}`, secret: chars(23, 40, B64) },
  { kind: 'google-api-key', text: `const maps = "AIza${chars(24, 35, URLSAFE)}";`, secret: `AIza${chars(24, 35, URLSAFE)}` },
  { kind: 'google-oauth', text: `"client_secret_value": "GOCSPX-${chars(25, 28, URLSAFE)}"`, secret: `GOCSPX-${chars(25, 28, URLSAFE)}` },
  { kind: 'huggingface', text: `huggingface-cli login --token hf_${chars(26, 34, ALNUM)}`, secret: `hf_${chars(26, 34, ALNUM)}` },
  { kind: 'npm', text: `//registry.npmjs.org/:_authToken=npm_${chars(27, 36, ALNUM)}`, secret: `npm_${chars(27, 36, ALNUM)}` },
  { kind: 'pypi', text: `twine upload -p pypi-AgEIcHlwaS5vcmc${chars(28, 60, URLSAFE)}`, secret: `pypi-AgEIcHlwaS5vcmc${chars(28, 60, URLSAFE)}` },
  {
    kind: 'sendgrid',
    text: `SG.${chars(29, 22, URLSAFE)}.${chars(30, 43, URLSAFE)} is the mail key`,
    secret: `SG.${chars(29, 22, URLSAFE)}.${chars(30, 43, URLSAFE)}`,
  },
  {
    kind: 'discord-webhook',
    text: `https://discord.com/api/webhooks/${chars(31, 18, '0123456789')}/${chars(32, 68, URLSAFE)}`,
    secret: `${chars(31, 18, '0123456789')}/${chars(32, 68, URLSAFE)}`,
  },
  {
    kind: 'telegram',
    text: `bot = Bot("${chars(33, 10, '123456789')}:AA${chars(34, 33, URLSAFE)}")`,
    secret: `${chars(33, 10, '123456789')}:AA${chars(34, 33, URLSAFE)}`,
  },
  { kind: 'groq', text: `GROQ=gsk_${chars(35, 52, ALNUM)}`, secret: `gsk_${chars(35, 52, ALNUM)}` },
  { kind: 'xai', text: `xai-${chars(36, 80, ALNUM)}`, secret: `xai-${chars(36, 80, ALNUM)}` },
  { kind: 'digitalocean', text: `doctl auth init -t dop_v1_${chars(37, 64, HEX)}`, secret: `dop_v1_${chars(37, 64, HEX)}` },
  { kind: 'vault', text: `VAULT_TOKEN=hvs.${chars(38, 90, URLSAFE)}`, secret: `hvs.${chars(38, 90, URLSAFE)}` },
  {
    kind: 'age',
    text: `# created: 2024\nAGE-SECRET-KEY-1${chars(39, 58, 'QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L')}`,
    secret: `AGE-SECRET-KEY-1${chars(39, 58, 'QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L')}`,
  },
  {
    kind: 'azure-connection-string',
    text: `DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=${chars(40, 86, B64)}==;EndpointSuffix=core.windows.net`,
    secret: chars(40, 86, B64),
  },
  { kind: 'bearer', text: `Authorization: Bearer ${chars(41, 40, ALNUM)}`, secret: chars(41, 40, ALNUM) },
  { kind: 'url-credentials', text: `DATABASE_URL=postgres://app:${chars(42, 20, ALNUM)}@db.internal:5432/prod`, secret: chars(42, 20, ALNUM) },
  { kind: 'password', text: `{"user": "app", "password": "Tr0ub4dor&3-${chars(43, 8, ALNUM)}"}`, secret: `Tr0ub4dor&3-${chars(43, 8, ALNUM)}` },
  { kind: 'cli-password', text: `mysql -u root --password=${chars(44, 18, ALNUM)} prod`, secret: chars(44, 18, ALNUM) },
  { kind: 'client-secret', text: `CLIENT_SECRET: ${chars(45, 32, ALNUM)}`, secret: chars(45, 32, ALNUM) },
];

/** Ordinary values that look a little like secrets and must stay as they are. */
export const ORDINARY: readonly string[] = [
  'foreign_key: account_id42',
  'cache_key: user:1234:profile',
  'idempotency_key: order-12345678',
  'sort_key = "createdAt#2024-01-01"',
  'partition_key: tenant-0042',
  'primary_key: id',
  'idempotency_key: 9b2f4c1e-7a3d-4e5f-8a9b-0c1d2e3f4a5b',
  'cache_key = "3f786850e387550fdab836ed7e6dc881de23001b"',
  'lookupKey: getElementById2',
  'secret: my-k8s-secret-name-01',
  'secretName: db-credentials',
  'PUBLIC_KEY=MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEr3v9bcm8Yj1Tn5Qw6xW2kH7pL4mZ8sN0dF1gJ3hK6qR9tU2vX5yA8bC1eG4iL7oP0sT3wZ6',
  '-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEr3v9bcm8Yj1Tn5Qw6xW2kH7pL4mZ8sN0\ndF1gJ3hK6qR9tU2vX5yA8bC1eG4iL7oP0sT3wZ6==\n-----END PUBLIC KEY-----',
  'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl me@host',
  'next_page_token: CiAKGjBpNDd2Nmp2Zml2cXRwYjBpOXA3',
  'eos_token: "</s>", pad_token = "<pad>"',
  'max_tokens: 4096 and token: 128000',
  'commit 3f786850e387550fdab836ed7e6dc881de23001b',
  'monkey=banana123 key=value PWD=/home/me',
  'const API_KEY = process.env.API_KEY;',
  'DB_PASSWORD=${DB_PASSWORD} JWT_SECRET=$SECRET',
  'OPENAI_API_KEY=sk-... (set it in .env)',
  'kubectl create secret generic api-keys --from-literal=name=value',
  'npm install @aws-sdk/client-s3 eyJ is how JSON starts in base64',
  'user.password_hash = bcrypt(password)',
];

/** Pieces of a secret this long are its own (a random run of 10 characters is nowhere else). */
const PIECE = 10;

/** The first piece of `secret` that shows in `text`, if any: a leak in whole or in part. */
export function leaks(text: string, secret: string): string | undefined {
  const parts = secret.split(/\n/).filter((l) => l.length >= PIECE);
  for (const part of parts) {
    for (let i = 0; i + PIECE <= part.length; i++) {
      const piece = part.slice(i, i + PIECE);
      if (text.includes(piece)) return piece;
    }
  }
  return undefined;
}

/** What the audio check reports (the partner API's Audio check resource); see index.ts for the rules. */

export interface AudioIssue {
  code: string;
  severity: 'error' | 'warn' | 'info';
  message: string;
}

export interface AudioSummary {
  text: string;
  format: string | null;
  sample_rate_hz: number | null;
  channels: number | null;
  channel_mode: 'stereo' | 'joint_stereo' | 'dual_channel' | 'mono' | null;
  bitrate_kbps: number | null;
  vbr: boolean;
  duration_s: number;
  size_bytes: number;
  device_storage_pct: number;
  tag_bytes: number;
  cover_art: boolean;
  header_frame: 'Xing' | 'Info' | 'VBRI' | null;
}

export interface AudioCheck {
  playable: boolean;
  ideal: boolean;
  fixable: boolean;
  summary: AudioSummary;
  issues: AudioIssue[];
}

/** The check of an uploaded .mp3 (`name` as uploaded): the audio object, or why it holds no MPEG Layer III audio (400). */

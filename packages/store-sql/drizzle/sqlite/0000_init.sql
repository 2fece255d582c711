CREATE TABLE `idem_records` (
	`scope` text NOT NULL,
	`idem_key` text NOT NULL,
	`fingerprint` text NOT NULL,
	`owner` text,
	`lease_until_ms` integer NOT NULL,
	`response_status` integer,
	`response_headers` text,
	`response_body` blob,
	`body_omitted` integer DEFAULT false NOT NULL,
	`created_at_ms` integer NOT NULL,
	`updated_at_ms` integer NOT NULL,
	`expires_at_ms` integer NOT NULL,
	PRIMARY KEY(`scope`, `idem_key`)
);
--> statement-breakpoint
CREATE INDEX `idem_records_expires_idx` ON `idem_records` (`expires_at_ms`);
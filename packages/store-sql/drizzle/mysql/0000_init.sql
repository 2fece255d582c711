CREATE TABLE `idem_records` (
	`scope` varbinary(1020) NOT NULL,
	`idem_key` varbinary(1020) NOT NULL,
	`fingerprint` varbinary(1020) NOT NULL,
	`owner` varbinary(1020),
	`lease_until_ms` bigint NOT NULL,
	`response_status` int,
	`response_headers` text,
	`response_body` longblob,
	`body_omitted` boolean NOT NULL DEFAULT false,
	`created_at_ms` bigint NOT NULL,
	`updated_at_ms` bigint NOT NULL,
	`expires_at_ms` bigint NOT NULL,
	CONSTRAINT `idem_records_scope_idem_key_pk` PRIMARY KEY(`scope`,`idem_key`)
);
--> statement-breakpoint
CREATE INDEX `idem_records_expires_idx` ON `idem_records` (`expires_at_ms`);
CREATE TABLE "idem_records" (
	"scope" varchar(255) NOT NULL,
	"idem_key" varchar(255) NOT NULL,
	"fingerprint" varchar(255) NOT NULL,
	"owner" varchar(255),
	"lease_until_ms" bigint NOT NULL,
	"response_status" integer,
	"response_headers" text,
	"response_body" "bytea",
	"body_omitted" boolean DEFAULT false NOT NULL,
	"created_at_ms" bigint NOT NULL,
	"updated_at_ms" bigint NOT NULL,
	"expires_at_ms" bigint NOT NULL,
	CONSTRAINT "idem_records_scope_idem_key_pk" PRIMARY KEY("scope","idem_key")
);
--> statement-breakpoint
CREATE INDEX "idem_records_expires_idx" ON "idem_records" USING btree ("expires_at_ms");
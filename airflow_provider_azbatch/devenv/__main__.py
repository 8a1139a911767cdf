from airflow_provider_azbatch.devenv.cli import main

raise SystemExit(main())

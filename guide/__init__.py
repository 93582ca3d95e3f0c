"""The UI layer of the guide (imports streamlit). The numbers come from `calculator`."""

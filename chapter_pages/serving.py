from guide.render import render_page

render_page("serving")
